package sinktest_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/sinktest"
)

func memStoreFor(fault string) func(*testing.T) sinktest.Store {
	return func(*testing.T) sinktest.Store {
		m := newMemStore(fault)
		return sinktest.Store{Writer: memWriter{m}, Reader: m}
	}
}

// The reference sink in memory passes the suite, so the suite asks for
// nothing a sink cannot do.
func TestMemStore(t *testing.T) {
	sinktest.Run(t, memStoreFor(""))
}

// faults are the ways memStore can break, with the tests that must catch
// each.
var faults = []struct {
	fault string
	catch []string
}{
	{"visible-before-commit", []string{"WriterCommitIsAtomic", "WriterAbortLeavesNothing", "CreateInAreas"}},
	{"ignore-truncate", []string{"WriterTruncateAndRewrite"}},
	{"list-newest-first", []string{"ListOldestFirst", "ListMany"}},
	{"no-exclusion", []string{"ClaimExclusive", "ClaimConcurrent", "LeaseExpiryTakeover"}},
	{"takeover-loses-checkpoint", []string{"LeaseExpiryTakeover", "SameOwnerClaimsTwice", "ReleaseThenResume"}},
	{"owner-only", []string{"SameOwnerClaimsTwice"}},
	{"usable-after-end", []string{"ReleaseThenResume", "CompleteDeletes", "CompleteArchives", "ClaimQuarantine"}},
	{"move-ignores-claims", []string{"MoveClaimedRefused"}},
	{"reason-sticks", []string{"MoveBetweenAreas"}},
	{"quarantine-drops-reason", []string{"ClaimQuarantine"}},
}

const faultEnv = "SINKTEST_FAULT"

// The suite fails broken sinks, each in the tests meant to catch the fault.
// Each broken sink runs in a child process (this test again, with the fault
// in the environment), since a failing suite fails its test.
func TestBrokenSinksFail(t *testing.T) {
	if fault := os.Getenv(faultEnv); fault != "" {
		// The child: run the suite against the broken sink; it must fail.
		sinktest.Run(t, memStoreFor(fault))
		return
	}
	for _, f := range faults {
		t.Run(f.fault, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenSinksFail$/^("+strings.Join(f.catch, "|")+")$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), faultEnv+"="+f.fault)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("the suite passed a sink with fault %s (err %v):\n%s", f.fault, err, out)
			}
			for _, name := range f.catch {
				if !bytes.Contains(out, []byte("--- FAIL: TestBrokenSinksFail/"+name+" ")) {
					t.Errorf("%s did not catch fault %s:\n%s", name, f.fault, out)
				}
			}
		})
	}
}

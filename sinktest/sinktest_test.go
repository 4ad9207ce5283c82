package sinktest_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sinktest"
)

// The reference sink in memory passes the suite, so the suite asks for
// nothing a sink cannot do.
func TestMemsink(t *testing.T) {
	sinktest.Run(t, func(*testing.T) sinktest.Store {
		m := memsink.New()
		return sinktest.Store{Writer: m.Writer(), Reader: m}
	})
}

func brokenStore(fault string) func(*testing.T) sinktest.Store {
	return func(*testing.T) sinktest.Store {
		b := newBroken(fault)
		return sinktest.Store{Writer: brokenWriter{b}, Reader: b}
	}
}

// A sink whose DeleteRecord ignores the version passes when it says so.
func TestDeleteRecordUnconditionalOption(t *testing.T) {
	sinktest.RunWithOptions(t, brokenStore("delete-record-unconditional"), sinktest.Options{DeleteRecordUnconditional: true})
}

// faults are the ways a broken sink breaks the contract, with the tests that
// must catch each (see broken in mem_test.go).
var faults = []struct {
	fault string
	catch []string
}{
	{"visible-before-commit", []string{"WriterCommitIsAtomic", "WriterAbortLeavesNothing", "CreateInAreas"}},
	{"ignore-truncate", []string{"WriterTruncateAndRewrite"}},
	{"commit-replaces", []string{"WriterNeverReplaces", "CreateRefusesExisting"}},
	{"list-newest-first", []string{"ListOldestFirst", "ListMany"}},
	{"readat-no-eof", []string{"ReadAt"}},
	{"missing-move-succeeds", []string{"NotFound", "MoveAfterMove"}},
	{"move-replaces", []string{"MoveRefusesToReplace"}},
	{"move-compares-sizes", []string{"MoveRefusesToReplace"}},
	{"refused-move-drops-reason", []string{"MoveRefusesToReplace"}},
	{"move-not-idempotent", []string{"MoveAfterMove"}},
	{"move-keeps-source", []string{"MoveAfterMove"}},
	{"reason-dropped", []string{"MoveBetweenAreas", "MoveAfterMove"}},
	{"reason-sticks", []string{"MoveBetweenAreas"}},
	{"delete-keeps-archived", []string{"Delete"}},
	{"read-missing-record-empty", []string{"RecordCreateIfAbsent", "RecordDelete"}},
	{"records-no-cas", []string{"RecordCreateIfAbsent", "RecordCompareAndSwap", "RecordConcurrentCAS"}},
	{"version-unchanged", []string{"RecordCompareAndSwap"}},
	{"delete-record-unconditional", []string{"RecordDelete"}},
	{"record-names-unsorted", []string{"RecordNames"}},
	{"records-follow-segments", []string{"RecordsIndependentOfAreas"}},
	{"record-size-off-by-one", []string{"RecordMaxSize"}},
	{"record-size-unbounded", []string{"RecordMaxSize"}},
}

const faultEnv = "SINKTEST_FAULT"

// The suite fails broken sinks, each in the tests meant to catch the fault.
// Each broken sink runs in a child process (this test again, with the fault
// in the environment), since a failing suite fails its test.
func TestBrokenSinksFail(t *testing.T) {
	if fault := os.Getenv(faultEnv); fault != "" {
		// The child: run the suite against the broken sink; it must fail.
		sinktest.Run(t, brokenStore(fault))
		return
	}
	for _, f := range faults {
		t.Run(f.fault, func(t *testing.T) {
			t.Parallel()
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

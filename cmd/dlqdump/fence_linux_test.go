package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
)

// tally is a destination counting deliveries per item.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *tally) Enqueue(x any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[fmt.Sprint(x)]++
	return nil
}

// restoreAll restores every ready segment of dir into dst, taking over the
// claims of stopped holders once seen unchanged for their lease.
func restoreAll(t *testing.T, dir string, ids []envelope.Identity, dst *tally, lease time.Duration) {
	t.Helper()
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{AsString: true},
		Queue: dst, Lease: lease, Owner: "taker", Encryption: &dlqdump.Encryption{Identities: ids}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		_, _ = r.Run(context.Background(), dlqdump.RunOptions{})
		if m, _ := filepath.Glob(filepath.Join(dir, "*.dlq")); len(m) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("segments left a minute later: %+v", r.Stats())
		}
		time.Sleep(lease / 3) // the lease of a stopped holder is time passing
	}
}

// copyDir copies the segments of a directory into a new one.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	if err := exec.Command("cp", "-a", dir+"/.", out).Run(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 19, defect 1: a rewrap stopped past its lease just before publishing
// its copy, while a restorer takes the original over (finding no copy,
// restoring it and finishing it), must not publish the copy when it goes on:
// its records would be restored again.
func TestRewrapStoppedNeverPublishesAfterTakeover(t *testing.T) {
	a, b := genIdentity(t), genIdentity(t)
	dir, items := encryptedDumpSized(t, 3000, 1<<20, a.Recipient())
	ka := keyFile(t, a)
	// The restorers hold both keys: a copy published for b is restored.
	var ids []envelope.Identity
	for _, k := range []string{ka, keyFile(t, b)} {
		id, err := envelope.ReadIdentityFile(k)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id...)
	}
	const lease = 300 * time.Millisecond
	args := []string{"rewrap", dir, "--identity", ka, "--recipient", b.Recipient().String(), "--lease", lease.String()}

	// The operation before the copy's commit, counted in a run on a copy.
	base := runChild(t, nil, append([]string{args[0], copyDir(t, dir)}, args[2:]...), 0, "", nil)
	if base.code != 0 {
		t.Fatalf("rewrap without faults; %s", base.result)
	}
	at := 0
	for i, op := range base.ops {
		if f := strings.Fields(op); len(f) >= 2 && f[1] == "commit" {
			at = i // the 1-based number of the operation before it
			break
		}
	}
	if at == 0 {
		t.Fatalf("no commit among the operations of rewrap: %q", base.ops)
	}

	dst := &tally{}
	stopped := false
	run := runChild(t, nil, args, at, "STOP", func(p *os.Process) {
		stopped = whenStopped(t, p, func() { restoreAll(t, dir, ids, dst, lease) })
	})
	if !stopped {
		t.Fatalf("rewrap did not stop at operation %d (%q); %s", at, base.ops[at-1], run.result)
	}
	t.Logf("rewrap stopped after %q, went on after a restorer took the original over; %s", base.ops[at-1], run.result)
	restoreAll(t, dir, ids, dst, lease) // whatever the rewrap left

	twice := 0
	for _, it := range items {
		switch n := dst.n[it]; {
		case n == 0:
			t.Errorf("%.20s never delivered", it)
		case n > 1:
			twice++
		}
	}
	if twice > 0 {
		t.Fatalf("%d of %d records delivered twice: the stopped rewrap published its copy after the takeover", twice, len(items))
	}
}

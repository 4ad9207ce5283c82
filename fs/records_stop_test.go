//go:build unix

package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// stopOnce makes the process say "locked" and stop itself (SIGSTOP) the
// first time a record write holds its lock: a restorer paused (a GC pause, a
// VM migration, SIGSTOP) in the middle of a checkpoint.
func stopOnce() {
	stopped := false
	fs.SetTestHookLocked(func() {
		if stopped {
			return
		}
		stopped = true
		fmt.Println("locked")
		childproc.StopSelf()
	})
}

// stopInWrite writes DLQDUMP_FS_DATA as the record of DLQDUMP_FS_SEGMENT in
// DLQDUMP_FS_DIR at version DLQDUMP_FS_VERSION, stopping itself while it
// holds the lock; once continued it prints how the write ended.
func stopInWrite() int {
	rd := &fs.Reader{Directory: os.Getenv("DLQDUMP_FS_DIR")}
	stopOnce()
	_, err := rd.WriteRecord(context.Background(), os.Getenv("DLQDUMP_FS_SEGMENT"), []byte(os.Getenv("DLQDUMP_FS_DATA")), os.Getenv("DLQDUMP_FS_VERSION"))
	printResult(err)
	return 0
}

// stopInRenew claims DLQDUMP_FS_SEGMENT with a lease of 300ms, says
// "claimed", then renews its claim, stopping itself in the renewal while it
// holds the lock; once continued it prints how the renewal ended.
func stopInRenew() int {
	rd := &fs.Reader{Directory: os.Getenv("DLQDUMP_FS_DIR")}
	c, err := claims.NewClaimer(rd, "stopped", 300*time.Millisecond, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cl, err := c.Claim(context.Background(), os.Getenv("DLQDUMP_FS_SEGMENT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "claim:", err)
		return 1
	}
	fmt.Println("claimed")
	stopOnce()
	printResult(cl.Save(context.Background(), []byte(`{"offset":1}`)))
	return 0
}

func printResult(err error) {
	switch {
	case err == nil:
		fmt.Println("result: ok")
	case errors.Is(err, sink.ErrConflict):
		fmt.Println("result: conflict:", err)
	case errors.Is(err, claims.ErrLeaseLost):
		fmt.Println("result: lease lost:", err)
	default:
		fmt.Println("result: error:", err)
	}
}

// waitStopped waits until the child has stopped itself.
func (c *child) waitStopped(t *testing.T) {
	t.Helper()
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(c.cmd.Process.Pid, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ws.Stopped() {
			t.Fatalf("the child did not stop: %v", ws)
		}
		return
	}
}

// result continues the stopped child and returns how its call ended.
func (c *child) result(t *testing.T) string {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatal("the child exited without a result")
			}
			if r, ok := strings.CutPrefix(l, "result: "); ok {
				return r
			}
		case <-timeout:
			t.Fatal("no result from the child within a minute")
		}
	}
}

// Issue 19, defect 3: a process stopped while it holds the lock of a record
// write blocks no other record, and not even its own for long: another
// process writes other records at once, creates new ones, and replaces the
// stopped one's record (a takeover) after a bounded wait. When the stopped
// process goes on, its write does not report success and does not change the
// record it no longer holds.
func TestStoppedWriterBlocksNothing(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	held, other, fresh := newName(), newName(), newName()
	vh, err := rd.WriteRecord(ctx, held, []byte("held 1"), "")
	if err != nil {
		t.Fatal(err)
	}
	vo, err := rd.WriteRecord(ctx, other, []byte("other 1"), "")
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "stop-in-write", "DLQDUMP_FS_DIR="+dir, "DLQDUMP_FS_SEGMENT="+held,
		"DLQDUMP_FS_DATA=held 2 by the stopped one", "DLQDUMP_FS_VERSION="+vh)
	c.waitFor(t, "locked")
	c.waitStopped(t)
	for i := range 20 {
		if vo, err = rd.WriteRecord(ctx, other, []byte(fmt.Sprint("other ", i+2)), vo); err != nil {
			t.Fatalf("writing another record while a stopped process holds a lock: %v", err)
		}
	}
	if _, err := rd.WriteRecord(ctx, fresh, []byte("fresh"), ""); err != nil {
		t.Fatalf("creating a record while a stopped process holds a lock: %v", err)
	}
	if b, v, err := rd.ReadRecord(ctx, held); err != nil || string(b) != "held 1" || v != vh {
		t.Fatalf("reading the stopped one's record = %q, %v", b, err)
	}
	vt, err := rd.WriteRecord(ctx, held, []byte("held 2 by the taker"), vh)
	if err != nil {
		t.Fatalf("taking over the stopped one's record: %v", err)
	}
	if got := c.result(t); got == "ok" {
		t.Fatalf("the stopped write, continued after its record was taken over, reports success")
	}
	if b, v, err := rd.ReadRecord(ctx, held); err != nil || string(b) != "held 2 by the taker" || v != vt {
		t.Fatalf("after the stopped write went on, the record = %q (%v), want the taker's", b, err)
	}
	if _, err := rd.WriteRecord(ctx, held, []byte("held 3"), vt); err != nil {
		t.Fatalf("writing on after the takeover: %v", err)
	}
	if b, _, err := rd.ReadRecord(ctx, held); err != nil || string(b) != "held 3" {
		t.Fatalf("record = %q, %v", b, err)
	}
}

// Issue 19, defect 3, with the claim protocol: a restorer (another process)
// holding a claim with a lease of 300ms stops in the middle of renewing it.
// Another restorer claims and renews a segment nobody claimed as if nothing
// happened, and takes the stopped one's segment over once its lease ran
// out; the stopped one, continued, learns it lost its claim.
func TestStoppedHolderIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	held, free := newName(), newName()
	c := startChild(t, "stop-in-renew", "DLQDUMP_FS_DIR="+dir, "DLQDUMP_FS_SEGMENT="+held)
	c.waitFor(t, "claimed")
	c.waitFor(t, "locked")
	c.waitStopped(t)
	now := time.Now() // b's clock, moved past the stopped one's lease below
	b, err := claims.NewClaimer(rd, "b", 300*time.Millisecond, &claims.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := b.Claim(ctx, free)
	if err != nil {
		t.Fatalf("claiming a segment nobody claimed: %v", err)
	}
	for i := range 10 {
		if err := cl.Save(ctx, []byte(fmt.Sprintf(`{"offset":%d}`, i))); err != nil {
			t.Fatalf("renewing a claim while a stopped restorer holds a lock: %v", err)
		}
	}
	if _, err := b.Claim(ctx, held); !errors.Is(err, claims.ErrClaimed) {
		t.Fatalf("claiming the stopped restorer's segment within its lease = %v, want ErrClaimed", err)
	}
	now = now.Add(time.Second) // its record seen unchanged for longer than its lease
	taken, err := b.Claim(ctx, held)
	if err != nil {
		t.Fatalf("taking the stopped restorer's segment over after its lease: %v", err)
	}
	if got := c.result(t); got == "ok" {
		t.Fatalf("the stopped restorer's renewal, continued after a takeover, reports success")
	}
	if err := taken.Save(ctx, []byte(`{"offset":7}`)); err != nil {
		t.Fatalf("the taker's claim after the stopped one went on: %v", err)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

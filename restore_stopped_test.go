//go:build unix

package dlqdump_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/internal/claims"
)

func init() {
	children["lock-and-stop"] = lockAndStopChild
}

// lockAndStopChild takes the locks a restorer takes while it checkpoints
// segment DLQDUMP_SEGMENT of DLQDUMP_DIR (that of its record's file, and
// that of the records directory, which versions before this one took at
// every checkpoint), says "locked" and stops itself (SIGSTOP): a restorer
// paused in the middle of a checkpoint.
func lockAndStopChild() int {
	dir := filepath.Join(os.Getenv("DLQDUMP_DIR"), fs.ClaimsDir)
	for _, p := range []string{dir, filepath.Join(dir, os.Getenv("DLQDUMP_SEGMENT")+".claim")} {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			fmt.Fprintln(os.Stderr, "flock", p, err)
			return 1
		}
	}
	fmt.Println("locked")
	childproc.StopSelf()
	return 0
}

// Issue 19, defect 3: a restorer holding segment A (lease 1s) stops in the
// middle of a checkpoint, holding its locks. Another restorer (another
// process here, the test) restores segment B, which nobody claimed, at
// once, and takes A over once its lease ran out: all 1,000 records are
// delivered while the first one is still stopped. (Before, a stopped
// restorer held the lock of the whole records directory and the other
// delivered nothing: every claim failed with the lock busy.)
func TestStoppedRestorerStallsNothing(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("s", 1000)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, items[:500])
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, items[500:])
	segs := segmentsIn(t, dir)
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	a := filepath.Base(segs[0])
	c, err := claims.NewClaimer(&fs.Reader{Directory: dir}, "stopped", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=lock-and-stop", "DLQDUMP_DIR="+dir, "DLQDUMP_SEGMENT="+a)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "locked\n" {
		t.Fatalf("the child said %q, %v", l, err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WUNTRACED, nil); err != nil || !ws.Stopped() {
		t.Fatalf("the child did not stop: %v, %v", ws, err)
	}
	var n atomic.Int64
	all := make(chan struct{})
	dst := queueFunc(func(any) error {
		if n.Add(1) == int64(len(items)) {
			close(all)
		}
		return nil
	})
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Lease: time.Second, CheckInterval: 50 * time.Millisecond})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		t.Fatalf("%d of %d records delivered in a minute while a restorer with a lease of 1s is stopped; stats %+v", n.Load(), len(items), r.Stats())
	}
	// The passes finish both segments (delete them) after their last
	// records.
	for deadline := time.Now().Add(time.Minute); len(segmentsIn(t, dir)) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("segments left a minute after every record was delivered: %q", segmentsIn(t, dir))
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != int64(len(items)) {
		t.Fatalf("%d records delivered, want %d", got, len(items))
	}
}

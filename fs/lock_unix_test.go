//go:build unix

package fs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
)

// A claim file locked by someone else (another process, or here another
// open file) makes Claim and Move fail with ErrClaimed after a bounded wait,
// and the claim's methods fail without losing the lease; a cancelled context
// ends the wait.
func TestClaimFileLockedTooLong(t *testing.T) {
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 100 * time.Millisecond
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	name := newSegment(t, dir)
	c, err := rd.Claim(t.Context(), name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held, err := lockFile(t.Context(), rd.claimPath(name), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := rd.Claim(t.Context(), name, "other", time.Minute); !errors.Is(err, dlqdump.ErrClaimed) || !errors.Is(err, errLockBusy) {
		t.Fatalf("Claim of a locked claim file = %v, want ErrClaimed", err)
	}
	if err := rd.Move(t.Context(), name, dlqdump.AreaReady, dlqdump.AreaArchive, ""); !errors.Is(err, dlqdump.ErrClaimed) {
		t.Fatalf("Move of a locked claim file = %v, want ErrClaimed", err)
	}
	if err := c.Renew(t.Context(), dlqdump.Checkpoint{}); !errors.Is(err, errLockBusy) || errors.Is(err, dlqdump.ErrLeaseLost) {
		t.Fatalf("Renew of a locked claim file = %v, want a busy error, not ErrLeaseLost", err)
	}
	if d := time.Since(start); d > 10*lockWait {
		t.Fatalf("three waits for a lock took %v; lockWait is %v", d, lockWait)
	}
	lockWait = time.Hour
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := rd.Claim(ctx, name, "other", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim with a context that times out = %v", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Renew(t.Context(), dlqdump.Checkpoint{Delivered: 1}); err != nil {
		t.Fatalf("Renew once the lock is free: %v", err)
	}
	if err := c.Complete(t.Context(), false); err != nil {
		t.Fatal(err)
	}
}

package dlqdump_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// Issue 20, defect 5: a Restorer on a directory that does not exist (a typo)
// restored nothing and said nothing: Run returned nil with 0 delivered. Run
// says it, naming the directory, and Stats().Missing shows it; once a Queue
// has created the directory, passes restore as usual.
func TestRunOnMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dlq-typo")
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst})
	for _, dry := range []bool{true, false} {
		rep, err := r.Run(t.Context(), dlqdump.RunOptions{DryRun: dry})
		if !errors.Is(err, dlqdump.ErrNotFound) || !strings.Contains(err.Error(), dir) || rep.Delivered != 0 {
			t.Fatalf("dry run %v on a missing directory: %+v, %v; want an error wrapping ErrNotFound naming %s", dry, rep, err, dir)
		}
	}
	if st := r.Stats(); !st.Missing || !errors.Is(st.LastError, dlqdump.ErrNotFound) {
		t.Fatalf("Stats = %+v, want Missing", st)
	}
	dumpItems(t, dir, dlqdump.Config{}, []string{"a", "b"})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil || rep.Delivered != 2 {
		t.Fatalf("after the directory was created: %+v, %v", rep, err)
	}
	if r.Stats().Missing {
		t.Fatal("Stats().Missing after the directory was created")
	}
}

// A started Restorer may well start before the first dump: it logs the
// missing directory once, not every pass, shows it in Stats, and restores
// once the directory is there.
func TestStartedOnMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dlq")
	logs := &syncBuffer{}
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, CheckInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for several refreshes that found the directory missing.
	seen := map[time.Time]bool{}
	for len(seen) < 4 {
		if st := r.Stats(); st.Missing {
			seen[st.Refreshed] = true
		}
		time.Sleep(time.Millisecond)
	}
	dumpItems(t, dir, dlqdump.Config{}, []string{"a", "b"})
	for len(dst.got()) < 2 {
		time.Sleep(time.Millisecond)
	}
	if n := strings.Count(logs.String(), "msg=\"the store does not exist"); n != 1 {
		t.Fatalf("%d log lines about the missing directory, want 1:\n%s", n, logs)
	}
	for r.Stats().Missing {
		time.Sleep(time.Millisecond) // the pass that restored refreshes the status after it
	}
}

//go:build unix

package fs_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
)

// A process killed while it wrote a record (a `dlqdump job create` killed
// between making its due marker's temporary file and linking it into place)
// leaves the temporary file; the next listing of the table removes it, and
// leaves alone one a live writer holds.
func TestKilledRecordWriteLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	r := &fs.Reader{Directory: dir}
	tb, err := r.Table("jobsdue")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := tb.WriteRecord(ctx, "d-20261127T030000.000Z-a", []byte(`{}`), ""); err != nil {
		t.Fatal(err)
	}
	tdir := filepath.Join(dir, fs.TablesDir, "jobsdue")
	stale := filepath.Join(tdir, ".d-20261127T030000.000Z-b.claim.5f3a9c01d2e4b6a8.tmp")
	if err := os.WriteFile(stale, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	// One a live writer holds (its lock taken) stays, however old.
	live := filepath.Join(tdir, ".d-20261127T030000.000Z-c.claim.77aa.tmp")
	lf, err := os.Create(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(live, old, old); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, err := range tb.RecordNames(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if len(names) != 1 {
		t.Fatalf("listed %v, want the one record", names)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the temporary file a killed write left is still there after a listing (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a listing removed the temporary file a live writer holds: %v", err)
	}
}

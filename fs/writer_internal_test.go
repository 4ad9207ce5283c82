//go:build unix

package fs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
)

// Create racing Recover in another process (issue 11, defect 3): between the
// exclusive create of the temporary file and its lock, a Recover locks the
// empty file and removes it. Create must not hand out a segment on the
// unlinked file (its Commit would fail forever and its bytes vanish); the
// segment written and committed after such a race is published.
func TestCreateRacingRecover(t *testing.T) {
	for _, tc := range []struct {
		name string
		race func(t *testing.T, dir, tmp string)
	}{
		{"recover removed it", func(t *testing.T, dir, tmp string) {
			// Recover (with its own open file, as another process)
			// finds the empty file unlocked and removes it.
			names, err := (&Writer{Directory: dir}).Recover(t.Context())
			if err != nil || len(names) != 0 {
				t.Fatalf("Recover = %v, %v", names, err)
			}
			if _, err := os.Stat(tmp); !os.IsNotExist(err) {
				t.Fatalf("Recover left the empty temporary file: %v", err)
			}
		}},
		{"recover holds the lock", func(t *testing.T, dir, tmp string) {
			// Recover has locked the file and is about to remove it
			// when Create tries its lock.
			f, err := os.OpenFile(tmp, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := tryLock(f); !ok || err != nil {
				t.Fatalf("tryLock = %v, %v", ok, err)
			}
			go func() {
				_ = removeSynced(dir, tmp)
				_ = f.Close()
			}()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			raced := 0
			testHookCreated = func(tmp string) {
				raced++
				if raced == 1 {
					tc.race(t, dir, tmp)
				}
			}
			defer func() { testHookCreated = nil }()
			now := time.Now()
			name := segment.FileName(now, segment.NewID(now))
			w := &Writer{Directory: dir}
			sw, err := w.Create(t.Context(), name)
			if err != nil {
				t.Fatalf("Create after losing the race: %v", err)
			}
			if _, err := sw.Write([]byte("segment bytes")); err != nil {
				t.Fatal(err)
			}
			if err := sw.Commit(t.Context()); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || string(b) != "segment bytes" {
				t.Fatalf("published segment = %q, %v", b, err)
			}
			if raced < 2 {
				t.Fatalf("Create made %d temporary files, want a second one after losing the first", raced)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
				t.Fatalf("files left behind: %v", left)
			}
		})
	}
}

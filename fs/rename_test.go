package fs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Issue 11 follow-up: linkRename (the rename of systems without
// RENAME_NOREPLACE) linked the new name and then failed to remove the old
// one; every retry failed with "file exists", so a Commit never finished.
// A retry that finds the new name on the same file removes the old name.
func TestLinkRenameRetryAfterFailedRemove(t *testing.T) {
	dir := t.TempDir()
	oldpath, newpath := filepath.Join(dir, ".a.dlq.open"), filepath.Join(dir, "a.dlq")
	if err := os.WriteFile(oldpath, []byte("segment"), 0o640); err != nil {
		t.Fatal(err)
	}
	// The first attempt: linked, then the remove failed.
	if err := os.Link(oldpath, newpath); err != nil {
		t.Fatal(err)
	}
	if err := linkRename(oldpath, newpath); err != nil {
		t.Fatalf("retry of linkRename after the link took effect = %v, want nil", err)
	}
	if _, err := os.Stat(oldpath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old name after the retry: %v, want it gone", err)
	}
	if b, err := os.ReadFile(newpath); err != nil || string(b) != "segment" {
		t.Fatalf("new name after the retry: %q, %v", b, err)
	}
}

// Another file at the new name is never replaced.
func TestLinkRenameRefusesAnotherFile(t *testing.T) {
	dir := t.TempDir()
	oldpath, newpath := filepath.Join(dir, ".a.dlq.open"), filepath.Join(dir, "a.dlq")
	if err := os.WriteFile(oldpath, []byte("ours"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newpath, []byte("theirs"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := linkRename(oldpath, newpath); !errors.Is(err, os.ErrExist) {
		t.Fatalf("linkRename onto another file = %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(newpath); string(b) != "theirs" {
		t.Fatalf("the other file was replaced: %q", b)
	}
	if _, err := os.Stat(oldpath); err != nil {
		t.Fatalf("old name: %v, want it kept", err)
	}
}

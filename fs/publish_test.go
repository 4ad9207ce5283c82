package fs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dlqdump/dlqdump/fs"
)

// Publishing never replaces a segment that already has the name.
func TestCommitNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	const name = "20261122T101500.000000000Z-0123456789abcdef.dlq"
	if err := os.WriteFile(filepath.Join(dir, name), []byte("existing"), 0o640); err != nil {
		t.Fatal(err)
	}
	w := &fs.Writer{Directory: dir}
	sw, err := w.Create(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write([]byte("newcomer")); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(context.Background()); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Commit over an existing segment = %v, want an error wrapping os.ErrExist", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != "existing" {
		t.Fatalf("the existing segment now holds %q", b)
	}
	if err := sw.Abort(); err != nil {
		t.Fatal(err)
	}
}

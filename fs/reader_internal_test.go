package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// newSegment publishes a small segment in dir and returns its name.
func newSegment(t testing.TB, dir string) string {
	t.Helper()
	now := time.Now()
	name := segment.FileName(now, segment.NewID(now))
	sw, err := (&Writer{Directory: dir}).Create(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write([]byte("segment bytes")); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return name
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// A quarantined segment's reason is a file beside it: written by Move to
// quarantine, replaced by a Move within quarantine, removed when the segment
// leaves quarantine or is deleted, left alone by a refused Move; no
// temporary files are left behind.
func TestReasonFiles(t *testing.T) {
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	ctx := t.Context()
	reasonFile := func(name string) string { return filepath.Join(dir, QuarantineDir, name+reasonSuffix) }

	name := newSegment(t, dir)
	if err := rd.Move(ctx, name, sink.AreaReady, sink.AreaQuarantine, "why"); err != nil {
		t.Fatal(err)
	}
	if got := readReason(reasonFile(name)); got != "why" {
		t.Fatalf("reason file holds %q, want why", got)
	}
	if err := rd.Move(ctx, name, sink.AreaQuarantine, sink.AreaQuarantine, "second look"); err != nil {
		t.Fatal(err)
	}
	if got := readReason(reasonFile(name)); got != "second look" {
		t.Fatalf("reason file holds %q after a Move within quarantine, want second look", got)
	}
	// A refused Move into quarantine keeps the reason of the segment there.
	other := filepath.Join(dir, name)
	if err := os.WriteFile(other, []byte("another segment of that name"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := rd.Move(ctx, name, sink.AreaReady, sink.AreaQuarantine, "clobbered"); !errors.Is(err, sink.ErrExist) {
		t.Fatalf("Move onto another segment = %v, want ErrExist", err)
	}
	if got := readReason(reasonFile(name)); got != "second look" {
		t.Fatalf("a refused Move changed the reason to %q", got)
	}
	if err := rd.Move(ctx, name, sink.AreaReady, sink.AreaQuarantine, ""); !errors.Is(err, sink.ErrExist) {
		t.Fatalf("Move onto another segment = %v, want ErrExist", err)
	}
	if !exists(t, reasonFile(name)) {
		t.Fatal("a refused Move without a reason removed the reason of the segment there")
	}
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	if err := rd.Move(ctx, name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
		t.Fatal(err)
	}
	if exists(t, reasonFile(name)) {
		t.Fatal("Move out of quarantine kept the reason file")
	}
	// Delete removes the reason file.
	if err := rd.Move(ctx, name, sink.AreaReady, sink.AreaQuarantine, "bad"); err != nil {
		t.Fatal(err)
	}
	if err := rd.Delete(ctx, sink.AreaQuarantine, name); err != nil {
		t.Fatal(err)
	}
	if exists(t, reasonFile(name)) {
		t.Fatal("Delete kept the reason file")
	}
	// No temporary files are left behind.
	for _, d := range []string{dir, filepath.Join(dir, QuarantineDir)} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if n := e.Name(); strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".tmp") {
				t.Errorf("left in %s: %s", d, n)
			}
		}
	}
}

// A Move that stopped after linking the destination (the fallback for
// filesystems without RENAME_NOREPLACE) is finished by the next Move: one
// file under both names is the same segment.
func TestMoveFinishesHalfDoneLink(t *testing.T) {
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	name := newSegment(t, dir)
	if err := os.MkdirAll(filepath.Join(dir, ArchiveDir), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, name), filepath.Join(dir, ArchiveDir, name)); err != nil {
		t.Fatal(err)
	}
	if err := rd.Move(t.Context(), name, sink.AreaReady, sink.AreaArchive, ""); err != nil {
		t.Fatalf("Move after a half-done link: %v", err)
	}
	if exists(t, filepath.Join(dir, name)) || !exists(t, filepath.Join(dir, ArchiveDir, name)) {
		t.Fatal("Move did not finish the half-done move")
	}
}

package fs_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// areaDir is where an area's segments are.
func areaDir(dir string, a sink.Area) string {
	switch a {
	case sink.AreaQuarantine:
		return filepath.Join(dir, fs.QuarantineDir)
	case sink.AreaArchive:
		return filepath.Join(dir, fs.ArchiveDir)
	}
	return dir
}

// partPath is the temporary file of a segment made by Reader.Create.
func partPath(dir string, a sink.Area, name string) string {
	return filepath.Join(areaDir(dir, a), "."+name+".part")
}

func fileExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func newName() string {
	now := time.Now()
	return segment.FileName(now, segment.NewID(now))
}

// wantAbsent fails unless the segment is neither listed nor opened in area.
func wantAbsent(t *testing.T, rd *fs.Reader, area sink.Area, name string) {
	t.Helper()
	for _, n := range names(t, rd, area) {
		if n == name {
			t.Fatalf("%s is listed in %s", name, area)
		}
	}
	if _, err := rd.Open(t.Context(), area, name); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("Open(%s, %s) = %v, want ErrNotFound", area, name, err)
	}
}

func wantContent(t *testing.T, rd *fs.Reader, area sink.Area, name, want string) {
	t.Helper()
	f, err := rd.Open(t.Context(), area, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
	if err != nil || string(b) != want {
		t.Fatalf("%s segment %s holds %q (%v), want %q", area, name, b, err, want)
	}
}

// The ".part" of a writer that is gone (its file closed uncommitted, as when
// its process dies) is removed by the next Create of the name, never
// published, in every area.
func TestCreateRemovesDeadWritersPart(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	for _, area := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		name := newName()
		sw, err := rd.Create(ctx, area, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Write([]byte("the stale half of a copy")); err != nil {
			t.Fatal(err)
		}
		if err := sw.(io.Closer).Close(); err != nil {
			t.Fatal(err)
		}
		if !fileExists(t, partPath(dir, area, name)) {
			t.Fatalf("no %s after its writer died", partPath(dir, area, name))
		}
		wantAbsent(t, rd, area, name)

		sw, err = rd.Create(ctx, area, name)
		if err != nil {
			t.Fatalf("Create(%s) over a dead writer's part: %v", area, err)
		}
		if _, err := sw.Write([]byte("fresh")); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		wantContent(t, rd, area, name, "fresh")
		if fileExists(t, partPath(dir, area, name)) {
			t.Fatalf("%s left after Commit", partPath(dir, area, name))
		}
	}
	if left := hidden(t, dir, fs.QuarantineDir, fs.ArchiveDir); len(left) != 0 {
		t.Fatalf("temporary files left: %q", left)
	}
}

// A live writer's ".part" is left alone: Recover keeps it, another Create of
// the name fails, and the writer commits what it wrote.
func TestLiveWritersPartLeftAlone(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	name := newName()
	sw, err := rd.Create(ctx, sink.AreaQuarantine, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write([]byte("written by the live writer")); err != nil {
		t.Fatal(err)
	}
	if got, err := rd.Recover(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Recover = %q, %v; want nothing done", got, err)
	}
	if !fileExists(t, partPath(dir, sink.AreaQuarantine, name)) {
		t.Fatal("Recover removed a live writer's part")
	}
	if _, err := rd.Create(ctx, sink.AreaQuarantine, name); err == nil {
		t.Fatal("a second Create of a name a live writer is writing succeeded")
	}
	if !fileExists(t, partPath(dir, sink.AreaQuarantine, name)) {
		t.Fatal("the second Create removed a live writer's part")
	}
	wantAbsent(t, rd, sink.AreaQuarantine, name)
	if err := sw.Commit(ctx); err != nil {
		t.Fatalf("the live writer's Commit: %v", err)
	}
	wantContent(t, rd, sink.AreaQuarantine, name, "written by the live writer")
}

// A ".part" left by a killed process stays while the process lives and is
// removed, never published, by Recover or by the next Create of its name
// once the process is dead.
func TestPartOfKilledProcess(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	for _, next := range []string{"Recover", "Create"} {
		t.Run(next, func(t *testing.T) {
			name := newName()
			c := startChild(t, "part-writer", "DLQDUMP_FS_DIR="+dir, "DLQDUMP_FS_SEGMENT="+name)
			c.waitFor(t, "written")
			part := partPath(dir, sink.AreaQuarantine, name)
			if b, err := os.ReadFile(part); err != nil || string(b) != "half of a copy" {
				t.Fatalf("the child's part holds %q (%v)", b, err)
			}
			// Alive: left alone.
			if _, err := rd.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := rd.Create(ctx, sink.AreaQuarantine, name); err == nil {
				t.Fatal("Create of a name a live process is writing succeeded")
			}
			if !fileExists(t, part) {
				t.Fatal("a live process's part was removed")
			}
			wantAbsent(t, rd, sink.AreaQuarantine, name)

			c.kill()
			switch next {
			case "Recover":
				if got, err := rd.Recover(ctx); err != nil || len(got) != 0 {
					t.Fatalf("Recover = %q, %v; want nothing published", got, err)
				}
				if fileExists(t, part) {
					t.Fatal("Recover kept a dead process's part")
				}
				wantAbsent(t, rd, sink.AreaQuarantine, name)
			case "Create":
				sw, err := rd.Create(ctx, sink.AreaQuarantine, name)
				if err != nil {
					t.Fatalf("Create over a dead process's part: %v", err)
				}
				if _, err := sw.Write([]byte("copied again, whole")); err != nil {
					t.Fatal(err)
				}
				wantAbsent(t, rd, sink.AreaQuarantine, name)
				if err := sw.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				wantContent(t, rd, sink.AreaQuarantine, name, "copied again, whole")
			}
		})
	}
}

package fs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// writeSegment publishes data as a segment named for time t, returning its
// name.
func writeSegment(t *testing.T, dir string, created time.Time, data []byte) string {
	t.Helper()
	name := segment.FileName(created, segment.NewID(created))
	sw, err := (&fs.Writer{Directory: dir}).Create(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return name
}

// fastTempDir returns a new directory on tmpfs (/dev/shm) where there is
// one, else t.TempDir(). Making and removing 100,000 files on a virtual disk
// can take ten times as long as listing them, and it is the listing that is
// tested.
func fastTempDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "dlqdump-fs-test-"); err == nil {
			t.Cleanup(func() {
				if err := os.RemoveAll(dir); err != nil {
					t.Error(err)
				}
			})
			return dir
		}
	}
	return t.TempDir()
}

// Listing 100,000 segments, among records and stray files, returns them all
// in order.
func TestList100k(t *testing.T) {
	const n, recorded = 100_000, 1000
	dir := fastTempDir(t)
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	names := make([]string, n)
	for i := range names {
		created := base.Add(time.Duration(i) * time.Millisecond)
		names[i] = segment.FileName(created, segment.NewID(created))
	}
	start := time.Now()
	rd := &fs.Reader{Directory: dir}
	// Segments are hard links to a few hidden files of sizes 0 to 3, made
	// in an order unlike the names': links are several times cheaper than
	// inodes on some disks.
	var srcs [4]string
	for size := range srcs {
		srcs[size] = filepath.Join(dir, fmt.Sprintf(".src%d", size))
		if err := os.WriteFile(srcs[size], make([]byte, size), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for j := range n {
		i := (j * 7919) % n // 7919 is prime, and n's factors are 2 and 5
		if err := os.Link(srcs[i%4], filepath.Join(dir, names[i])); err != nil {
			t.Fatal(err)
		}
		if i%(n/recorded) == 0 {
			if _, err := rd.WriteRecord(t.Context(), names[i], fmt.Appendf(nil, `{"v":2,"rev":%d}`, i), ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Strays that are not segments.
	for _, stray := range []string{"." + names[5] + ".open", "." + names[6] + ".part", ".hidden.dlq", "notes.txt", names[7] + ".reason"} {
		if err := os.WriteFile(filepath.Join(dir, stray), []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.dlq"), 0o750); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d segments in %v", n, time.Since(start))

	start = time.Now()
	i := 0
	for si, err := range rd.List(t.Context(), sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		if i >= n || si.Name != names[i] {
			t.Fatalf("segment %d is %s, want %s", i, si.Name, names[min(i, n-1)])
		}
		if si.Size != int64(i%4) || si.Area != sink.AreaReady || si.Reason != "" {
			t.Fatalf("%s: %+v, want size %d in ready without a reason", si.Name, si, i%4)
		}
		i++
	}
	took := time.Since(start)
	if i != n {
		t.Fatalf("listed %d segments, want %d", i, n)
	}
	t.Logf("listed %d segments in %v", n, took)
	records := 0
	for name, err := range rd.RecordNames(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if want := names[records*(n/recorded)]; name != want {
			t.Fatalf("record name %d is %s, want %s", records, name, want)
		}
		records++
	}
	if records != recorded {
		t.Fatalf("%d record names, want %d", records, recorded)
	}
}

// leaveOpen starts a segment with records in a temporary file whose writer
// then dies (its file is closed, never committed), and returns its name. mk
// starts the segment's file.
func leaveOpen(t *testing.T, mk func(name string) (sink.SegmentWriter, error), records int) string {
	t.Helper()
	now := time.Now()
	hdr := segment.Header{Codec: segment.CodecZstd, Created: now, ID: segment.NewID(now)}
	name := segment.FileName(now, hdr.ID)
	sw, err := mk(name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := segment.NewWriter(sw, hdr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range records {
		if err := w.Add(now, nil, fmt.Appendf(nil, "record %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := sw.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := sw.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// Recover publishes the segments crashed Queues left open (".open") in the
// ready directory, and those older restorers left in quarantine the same way;
// a damaged one in quarantine stays in quarantine. What dead writers left
// through Reader.Create (".part") is removed, in every area, never published.
func TestReaderRecover(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	queue := func(sub string) func(string) (sink.SegmentWriter, error) {
		w := &fs.Writer{Directory: filepath.Join(dir, sub)}
		return func(name string) (sink.SegmentWriter, error) { return w.Create(ctx, name) }
	}
	ready, quar := leaveOpen(t, queue("."), 5), leaveOpen(t, queue(fs.QuarantineDir), 7)
	var parts []string
	for _, a := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		parts = append(parts, leaveOpen(t, func(name string) (sink.SegmentWriter, error) { return rd.Create(ctx, a, name) }, 3))
	}
	// A temporary file with a damaged header, in quarantine.
	bad := segment.FileName(time.Now(), segment.NewID(time.Now()))
	if err := os.WriteFile(filepath.Join(dir, fs.QuarantineDir, "."+bad+".open"), make([]byte, 100), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, a := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		for range rd.List(ctx, a) {
			t.Fatalf("a segment left open is listed in %s before Recover", a)
		}
	}
	if n := len(hidden(t, dir, fs.QuarantineDir, fs.ArchiveDir)); n != 6 {
		t.Fatalf("%d temporary files before Recover, want 6", n)
	}

	got, err := rd.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{ready, quar}; !slices.Equal(got, want) {
		t.Fatalf("Recover = %q, want %q", got, want)
	}
	count := func(area sink.Area, name string) uint64 {
		t.Helper()
		f, err := rd.Open(ctx, area, name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := segment.NewReader(f, f.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Sealed() {
			t.Fatalf("%s not sealed by Recover", name)
		}
		return r.Footer().Records
	}
	if n := count(sink.AreaReady, ready); n != 5 {
		t.Fatalf("recovered ready segment has %d records, want 5", n)
	}
	if n := count(sink.AreaQuarantine, quar); n != 7 {
		t.Fatalf("recovered quarantined segment has %d records, want 7", n)
	}
	var listed []string
	reasons := map[string]string{}
	for si, err := range rd.List(ctx, sink.AreaQuarantine) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, si.Name)
		reasons[si.Name] = si.Reason
	}
	want := []string{quar, bad}
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("quarantine after Recover = %q, want %q", listed, want)
	}
	if !strings.HasPrefix(reasons[bad], "recover: ") || reasons[quar] != "" {
		t.Fatalf("reasons after Recover = %q", reasons)
	}
	if got := names(t, rd, sink.AreaReady); !slices.Equal(got, []string{ready}) {
		t.Fatalf("ready after Recover: %q, want %q", got, ready)
	}
	if got := names(t, rd, sink.AreaArchive); len(got) != 0 {
		t.Fatalf("archive after Recover: %q, want nothing", got)
	}
	for _, p := range parts {
		for _, a := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
			if _, err := rd.Open(ctx, a, p); !errors.Is(err, sink.ErrNotFound) {
				t.Fatalf("the half-written %s is in %s after Recover: %v", p, a, err)
			}
		}
	}
	if left := hidden(t, dir, fs.QuarantineDir, fs.ArchiveDir); len(left) != 0 {
		t.Fatalf("temporary files left by Recover: %q", left)
	}
	if _, err := os.Stat(filepath.Join(dir, fs.QuarantineDir, fs.QuarantineDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Recover made a quarantine directory inside quarantine: %v", err)
	}
	// Nothing more to do.
	if got, err := rd.Recover(ctx); err != nil || len(got) != 0 {
		t.Fatalf("second Recover = %q, %v", got, err)
	}
}

// hidden returns the hidden files (temporary files) in dir and its subs,
// besides the records directory.
func hidden(t *testing.T, dir string, subs ...string) []string {
	t.Helper()
	var out []string
	for _, d := range append([]string{"."}, subs...) {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") && e.Name() != fs.ClaimsDir {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out
}

// names lists an area.
func names(t *testing.T, rd *fs.Reader, area sink.Area) []string {
	t.Helper()
	var out []string
	for si, err := range rd.List(t.Context(), area) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, si.Name)
	}
	return out
}

// A Reader on a directory that does not exist lists nothing, recovers
// nothing, reads no records and creates nothing.
func TestReaderMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	for _, a := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		for _, err := range rd.List(ctx, a) {
			t.Fatalf("List(%s) of a missing directory yielded %v", a, err)
		}
	}
	if got, err := rd.Recover(ctx); err != nil || got != nil {
		t.Fatalf("Recover = %q, %v", got, err)
	}
	name := segment.FileName(time.Now(), segment.NewID(time.Now()))
	if _, _, err := rd.ReadRecord(ctx, name); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("ReadRecord = %v, want ErrNotFound", err)
	}
	if err := rd.DeleteRecord(ctx, name, "v"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("DeleteRecord = %v, want ErrNotFound", err)
	}
	for n, err := range rd.RecordNames(ctx) {
		t.Fatalf("RecordNames of a missing directory yielded %q, %v", n, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory was created: %v", err)
	}
}

// Every method wants a Directory and plain segment names.
func TestReaderRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	empty := &fs.Reader{}
	for _, err := range empty.List(ctx, sink.AreaReady) {
		if !errors.Is(err, sink.ErrConfig) {
			t.Fatalf("List without a Directory = %v, want ErrConfig", err)
		}
	}
	if _, err := empty.Recover(ctx); !errors.Is(err, sink.ErrConfig) {
		t.Fatalf("Recover without a Directory = %v, want ErrConfig", err)
	}
	good := segment.FileName(time.Now(), segment.NewID(time.Now()))
	if _, err := empty.WriteRecord(ctx, good, []byte("x"), ""); !errors.Is(err, sink.ErrConfig) {
		t.Fatalf("WriteRecord without a Directory = %v, want ErrConfig", err)
	}
	for _, err := range empty.RecordNames(ctx) {
		if !errors.Is(err, sink.ErrConfig) {
			t.Fatalf("RecordNames without a Directory = %v, want ErrConfig", err)
		}
	}
	dir := t.TempDir()
	rd := &fs.Reader{Directory: filepath.Join(dir, "sub")}
	// A segment outside the Reader's directory, reachable with "..".
	outside := writeSegment(t, dir, time.Now(), []byte("outside"))
	for _, name := range []string{"", "../" + outside, "..", "a/" + good, `a\` + good, "." + good, good + ".open", good + ".part", "x.txt"} {
		if _, err := rd.Open(ctx, sink.AreaReady, name); !errors.Is(err, fs.ErrName) {
			t.Errorf("Open(%q) = %v, want ErrName", name, err)
		}
		if err := rd.Move(ctx, name, sink.AreaQuarantine, sink.AreaReady, ""); !errors.Is(err, fs.ErrName) {
			t.Errorf("Move(%q) = %v, want ErrName", name, err)
		}
		if err := rd.Delete(ctx, sink.AreaQuarantine, name); !errors.Is(err, fs.ErrName) {
			t.Errorf("Delete(%q) = %v, want ErrName", name, err)
		}
		if _, err := rd.Create(ctx, sink.AreaQuarantine, name); !errors.Is(err, fs.ErrName) {
			t.Errorf("Create(%q) = %v, want ErrName", name, err)
		}
		if _, _, err := rd.ReadRecord(ctx, name); !errors.Is(err, fs.ErrName) {
			t.Errorf("ReadRecord(%q) = %v, want ErrName", name, err)
		}
		if _, err := rd.WriteRecord(ctx, name, []byte("x"), ""); !errors.Is(err, fs.ErrName) {
			t.Errorf("WriteRecord(%q) = %v, want ErrName", name, err)
		}
		if err := rd.DeleteRecord(ctx, name, "v"); !errors.Is(err, fs.ErrName) {
			t.Errorf("DeleteRecord(%q) = %v, want ErrName", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, outside)); err != nil {
		t.Fatalf("the segment outside is gone: %v", err)
	}
	if _, err := rd.Open(ctx, sink.Area(9), good); err == nil {
		t.Fatal("Open of an unknown area succeeded")
	}
	if _, err := rd.Create(ctx, sink.Area(9), good); err == nil {
		t.Fatal("Create in an unknown area succeeded")
	}
	if _, err := rd.WriteRecord(ctx, good, nil, ""); err == nil {
		t.Fatal("WriteRecord of an empty record succeeded (an empty file is no record)")
	}
}

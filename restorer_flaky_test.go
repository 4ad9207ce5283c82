package dlqdump_test

import (
	"context"
	"errors"
	"io"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// flakyReader is an fs.Reader whose segments fail reads past an offset with
// the error an HTTP client gives for a dropped connection: a *url.Error
// wrapping io.EOF.
type flakyReader struct {
	*fs.Reader
	failAt  int64
	failing atomic.Bool
}

func (r *flakyReader) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := r.Reader.Open(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return &flakyFile{File: f, r: r}, nil
}

type flakyFile struct {
	sink.File
	r *flakyReader
}

func (f *flakyFile) ReadAt(p []byte, off int64) (int, error) {
	// Reads of blocks in the middle fail; the header and footer read fine.
	if f.r.failing.Load() && off >= f.r.failAt && off < f.Size()-16<<10 {
		return 0, &url.Error{Op: "Get", URL: "http://s3.local/bucket/segment", Err: io.EOF}
	}
	return f.File.ReadAt(p, off)
}

// A read failing with an error that wraps io.EOF (a dropped connection) is an
// I/O error, not the end of the segment: the segment is not completed, and a
// later pass delivers everything.
func TestRestoreDroppedConnectionIsNotEndOfSegment(t *testing.T) {
	dir := t.TempDir()
	all := itemsN("flaky", 20000)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 8 * dlqdump.Kilobyte, Codec: dlqdump.NoCompression}, all)
	rd := &flakyReader{Reader: &fs.Reader{Directory: dir}, failAt: 300 << 10}
	rd.failing.Store(true)
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst})
	if err := r.Restore(context.Background()); err == nil {
		t.Fatal("the pass reported no error although reads failed")
	} else if errors.Is(err, io.EOF) {
		t.Fatalf("the error matches io.EOF: %v", err)
	}
	if n := len(segmentsIn(t, dir)); n != 1 {
		t.Fatalf("%d segments left after a failed pass, want the segment kept", n)
	}
	partial := len(dst.got())
	if partial == 0 || partial >= len(all) {
		t.Fatalf("%d of %d delivered before the failure: the test did not fail mid-segment", partial, len(all))
	}
	rd.failing.Store(false)
	if err := r.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := dst.got()
	slices.Sort(got)
	got = slices.Compact(got)
	if len(got) != len(all) {
		t.Fatalf("%d distinct items delivered, want %d", len(got), len(all))
	}
	if n := len(segmentsIn(t, dir)); n != 0 {
		t.Fatalf("%d segments left after the complete pass", n)
	}
	t.Logf("%d delivered before the dropped connection, the rest after it", partial)
}

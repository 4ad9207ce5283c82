package dlqdump_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// hookReader is an fs.Reader that runs hooks at chosen calls, to replay an
// interleaving of two processes deterministically.
//
// A Restorer lists the ready area, the records and the quarantine at once:
// onRecordNames runs once the ready area was listed, and the quarantine is
// listed once it ran, the order of a listing one after the other.
type hookReader struct {
	*fs.Reader
	mu            sync.Mutex
	onRecordNames func()                            // once, before listing the records
	onOpenMissing func(area sink.Area, name string) // once, after an Open found nothing
	readyListed   chan struct{}                     // closed once the ready area was listed
	hooked        chan struct{}                     // closed once onRecordNames ran
	once          sync.Once
}

func (h *hookReader) init() {
	h.once.Do(func() { h.readyListed, h.hooked = make(chan struct{}), make(chan struct{}) })
}

func (h *hookReader) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	h.init()
	h.mu.Lock()
	pending := h.onRecordNames != nil
	h.mu.Unlock()
	return func(yield func(sink.Info, error) bool) {
		switch {
		case area == sink.AreaReady:
			defer func() {
				h.mu.Lock()
				defer h.mu.Unlock()
				select {
				case <-h.readyListed:
				default:
					close(h.readyListed)
				}
			}()
		case area == sink.AreaQuarantine && pending:
			select {
			case <-h.hooked:
			case <-ctx.Done():
				yield(sink.Info{}, ctx.Err())
				return
			}
		}
		for si, err := range h.Reader.List(ctx, area) {
			if !yield(si, err) {
				return
			}
		}
	}
}

func (h *hookReader) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	h.init()
	h.mu.Lock()
	f := h.onRecordNames
	h.onRecordNames = nil
	h.mu.Unlock()
	if f != nil {
		select {
		case <-h.readyListed:
		case <-ctx.Done():
		}
		f()
		close(h.hooked)
	}
	return h.Reader.RecordNames(ctx)
}

func (h *hookReader) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := h.Reader.Open(ctx, area, name)
	if errors.Is(err, sink.ErrNotFound) {
		h.mu.Lock()
		hook := h.onOpenMissing
		h.onOpenMissing = nil
		h.mu.Unlock()
		if hook != nil {
			hook(area, name)
		}
	}
	return f, err
}

// damagedSegment dumps 3000 records into one segment of 4 KiB blocks and
// damages its fourth block; it returns the items and the segment's name.
func damagedSegment(t *testing.T, dir string) ([]string, string) {
	t.Helper()
	items := itemsN("d", 3000)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 4 * dlqdump.Kilobyte}, items)
	paths := segmentsIn(t, dir)
	if len(paths) != 1 {
		t.Fatalf("%d segments, want 1", len(paths))
	}
	corruptBlock(t, paths[0], 3)
	return items, filepath.Base(paths[0])
}

// Restorer B lists the ready segments; restorer A then restores the damaged
// segment (delivering its intact records) and quarantines it, its record
// keeping the progress; B, going on with its listing, claims the segment:
// Claim takes a quarantined (released-looking) record at once, B finds the
// segment gone from the ready area and Forgets the claim, deleting the
// record. Releasing the segment then feeds every delivered record again.
func TestReviewStaleListingErasesQuarantinedProgress(t *testing.T) {
	dir := t.TempDir()
	items, name := damagedSegment(t, dir)
	dst := &dest{}
	ra := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Owner: "a"})
	hb := &hookReader{Reader: &fs.Reader{Directory: dir}}
	hb.onRecordNames = func() {
		// B has listed the ready area; A finishes the segment meanwhile.
		if err := ra.Restore(t.Context()); err != nil {
			t.Errorf("restorer A: %v", err)
		}
	}
	rb := newRestorer(t, dlqdump.Config{Reader: hb, Queue: dst, Owner: "b"})
	if err := rb.Restore(t.Context()); err != nil {
		t.Fatalf("restorer B: %v", err)
	}
	delivered := len(dst.got())
	if delivered == 0 || delivered >= len(items) {
		t.Fatalf("%d of %d delivered from a segment with one damaged block", delivered, len(items))
	}
	rd := &fs.Reader{Directory: dir}
	if _, _, err := rd.ReadRecord(t.Context(), name); err != nil {
		t.Errorf("the quarantined segment's record (its progress) is gone: %v", err)
	}
	// Release and restore, as the docs suggest.
	if err := rd.Move(t.Context(), name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
		t.Fatal(err)
	}
	if err := ra.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again := len(dst.got()) - delivered; again != 0 {
		t.Fatalf("released and restored: %d records delivered again (of %d delivered before the quarantine)", again, delivered)
	}
}

// A quarantined segment's record keeps its progress. Sweep checks that the
// segment is neither ready nor quarantined, one area after the other: a
// release (quarantine -> ready, by the CLI or any user) that lands between
// the two checks makes Sweep delete the record of a segment that is ready,
// and the next restore feeds every record delivered before the quarantine
// again.
func TestReviewSweepRacingReleaseErasesProgress(t *testing.T) {
	dir := t.TempDir()
	items, name := damagedSegment(t, dir)
	dst := &dest{}
	rd := &fs.Reader{Directory: dir}
	ra := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst, Owner: "a"})
	if err := ra.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	delivered := len(dst.got())
	if delivered == 0 || delivered >= len(items) {
		t.Fatalf("%d of %d delivered from a segment with one damaged block", delivered, len(items))
	}
	// B's pass sweeps the records of segments that are neither ready nor
	// quarantined: it lists the ready segments (not there), then the
	// operator releases the segment, then it lists the quarantined ones
	// (not there any more), and Sweep must find it ready.
	hb := &hookReader{Reader: &fs.Reader{Directory: dir}}
	hb.onRecordNames = func() {
		if err := rd.Move(t.Context(), name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
			t.Errorf("release: %v", err)
		}
	}
	rb := newRestorer(t, dlqdump.Config{Reader: hb, Queue: &dest{}, Owner: "b"})
	if _, err := rb.Run(t.Context(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if hb.onRecordNames != nil {
		t.Fatal("B's pass never listed the records")
	}
	if _, _, err := rd.ReadRecord(t.Context(), name); err != nil {
		t.Errorf("the released segment's record (its progress) was swept: %v", err)
	}
	if err := ra.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again := len(dst.got()) - delivered; again != 0 {
		t.Fatalf("released and restored: %d records delivered again (of %d delivered before the quarantine)", again, delivered)
	}
}

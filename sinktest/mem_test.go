package sinktest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// broken is memsink with one fault: a broken sink the suite must reject.
// Its methods are memsink's except where the fault changes them.
type broken struct {
	*memsink.Store
	fault string // see faults in sinktest_test.go

	mu      sync.Mutex
	reasons map[string]string // the last quarantine reason per name, for "reason-sticks"
}

func newBroken(fault string) *broken {
	return &broken{Store: memsink.New(), fault: fault, reasons: map[string]string{}}
}

var _ sink.Reader = (*broken)(nil)

// brokenWriter is the Writer side of a broken store.
type brokenWriter struct{ b *broken }

func (w brokenWriter) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	return w.b.Create(ctx, sink.AreaReady, name)
}

func (b *broken) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	sw, err := b.Store.Create(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return &brokenSegment{SegmentWriter: sw, b: b, area: area, name: name}, nil
}

type brokenSegment struct {
	sink.SegmentWriter
	b    *broken
	area sink.Area
	name string
	buf  []byte
}

func (w *brokenSegment) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if w.b.fault == "visible-before-commit" {
		w.b.Put(w.area, w.name, w.buf)
	}
	return w.SegmentWriter.Write(p)
}

func (w *brokenSegment) Truncate(size int64) error {
	if w.b.fault == "ignore-truncate" {
		return nil
	}
	w.buf = w.buf[:size]
	return w.SegmentWriter.Truncate(size)
}

func (w *brokenSegment) Commit(ctx context.Context) error {
	switch w.b.fault {
	case "visible-before-commit", "commit-replaces":
		w.b.Put(w.area, w.name, w.buf)
		return nil
	}
	return w.SegmentWriter.Commit(ctx)
}

func (b *broken) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		var infos []sink.Info
		for si, err := range b.Store.List(ctx, area) {
			if err != nil {
				yield(si, err)
				return
			}
			if b.fault == "reason-sticks" && area != sink.AreaQuarantine {
				b.mu.Lock()
				si.Reason = b.reasons[si.Name]
				b.mu.Unlock()
			}
			infos = append(infos, si)
		}
		if b.fault == "list-newest-first" {
			slices.Reverse(infos)
		}
		for _, si := range infos {
			if !yield(si, nil) {
				return
			}
		}
	}
}

func (b *broken) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := b.Store.Open(ctx, area, name)
	if err != nil || b.fault != "readat-no-eof" {
		return f, err
	}
	return noEOF{f}, nil
}

// noEOF hides io.EOF after a short read.
type noEOF struct{ sink.File }

func (f noEOF) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (b *broken) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	src, dst := b.Get(from, name), b.Get(to, name)
	switch {
	case b.fault == "missing-move-succeeds" && src == nil:
		return nil
	case b.fault == "move-replaces" && dst != nil:
		_ = b.Store.Delete(ctx, to, name)
	case b.fault == "move-compares-sizes" && dst != nil && src != nil && len(dst) == len(src):
		return b.Store.Delete(ctx, from, name)
	case b.fault == "move-not-idempotent" && dst != nil:
		return fmt.Errorf("%w: %s segment %s", sink.ErrExist, to, name)
	case b.fault == "move-keeps-source" && dst != nil && bytes.Equal(dst, src):
		return nil
	case b.fault == "reason-dropped":
		reason = ""
	}
	err := b.Store.Move(ctx, name, from, to, reason)
	if b.fault == "refused-move-drops-reason" && err != nil && to == sink.AreaQuarantine && dst != nil {
		b.Put(to, name, dst)
	}
	if err == nil {
		if to == sink.AreaQuarantine {
			b.mu.Lock()
			b.reasons[name] = reason
			b.mu.Unlock()
		}
		if b.fault == "records-follow-segments" {
			b.dropRecord(ctx, name)
		}
	}
	return err
}

func (b *broken) Delete(ctx context.Context, area sink.Area, name string) error {
	if b.fault == "delete-keeps-archived" && area == sink.AreaArchive && b.Get(area, name) != nil {
		return nil
	}
	err := b.Store.Delete(ctx, area, name)
	if err == nil && b.fault == "records-follow-segments" {
		b.dropRecord(ctx, name)
	}
	return err
}

func (b *broken) dropRecord(ctx context.Context, name string) {
	if _, v, err := b.Store.ReadRecord(ctx, name); err == nil {
		_ = b.Store.DeleteRecord(ctx, name, v)
	}
}

func (b *broken) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	data, v, err := b.Store.ReadRecord(ctx, name)
	if err != nil && b.fault == "read-missing-record-empty" {
		return nil, "", nil
	}
	return data, v, err
}

func (b *broken) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	switch {
	case b.fault == "records-no-cas":
		for { // whatever the version: every writer wins
			_, cur, _ := b.Store.ReadRecord(ctx, name)
			if v, err := b.Store.WriteRecord(ctx, name, data, cur); err == nil {
				return v, nil
			}
		}
	case b.fault == "version-unchanged" && ifVersion != "":
		_, err := b.Store.WriteRecord(ctx, name, data, ifVersion)
		return ifVersion, err
	case b.fault == "record-size-off-by-one" && len(data) >= sink.MaxRecordSize:
		return "", fmt.Errorf("record of %d bytes: too large", len(data))
	case b.fault == "record-size-unbounded" && len(data) > sink.MaxRecordSize:
		data = data[:sink.MaxRecordSize]
	}
	return b.Store.WriteRecord(ctx, name, data, ifVersion)
}

func (b *broken) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	if b.fault == "delete-record-unconditional" {
		if _, cur, err := b.Store.ReadRecord(ctx, name); err == nil {
			ifVersion = cur
		}
	}
	return b.Store.DeleteRecord(ctx, name, ifVersion)
}

func (b *broken) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	if b.fault != "record-names-unsorted" {
		return b.Store.RecordNames(ctx)
	}
	return func(yield func(string, error) bool) {
		var names []string
		for n, err := range b.Store.RecordNames(ctx) {
			if err != nil {
				yield("", err)
				return
			}
			names = append(names, n)
		}
		slices.Reverse(names)
		for _, n := range names {
			if !yield(n, nil) {
				return
			}
		}
	}
}

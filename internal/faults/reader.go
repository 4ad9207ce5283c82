package faults

import (
	"context"
	"iter"

	"github.com/dlqdump/dlqdump/sink"
)

// The operations of a wrapped sink.Reader, of the Files it opens and of the
// SegmentWriters it creates.
const (
	OpList         Op = "Reader.List"
	OpOpen         Op = "Reader.Open"
	OpReadAt       Op = "File.ReadAt"
	OpCreateIn     Op = "Reader.Create"
	OpPartWrite    Op = "Part.Write"
	OpPartCommit   Op = "Part.Commit"
	OpPartAbort    Op = "Part.Abort"
	OpMove         Op = "Reader.Move"
	OpDelete       Op = "Reader.Delete"
	OpReadRecord   Op = "Record.Read"
	OpWriteRecord  Op = "Record.Write"
	OpDeleteRecord Op = "Record.Delete"
	OpRecordNames  Op = "Record.Names"
	OpReaderRecov  Op = "Reader.Recover"
)

// WrapReader returns r with every call counted by in and failed where in's
// plan says: each method of sink.Reader, the ReadAt of the Files it opens
// and the Write, Commit and Abort of the segments it creates (Sync and
// Truncate, which restorers do not call, pass through uncounted), and
// Recover when r is a sink.Recoverer. A fault on a listing (List,
// RecordNames) ends the listing with the failure before its first item.
func WrapReader(r sink.Reader, in *Injector) sink.Reader {
	w := &reader{inner: r, in: in}
	if _, ok := r.(sink.Recoverer); ok {
		return struct {
			*reader
			sink.Recoverer
		}{w, readerRecoverer{w}}
	}
	return w
}

type reader struct {
	inner sink.Reader
	in    *Injector
}

func (r *reader) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		if err := r.in.Do(ctx, OpList, func() error { return nil }); err != nil {
			yield(sink.Info{}, err)
			return
		}
		for si, err := range r.inner.List(ctx, area) {
			if !yield(si, err) || err != nil {
				return
			}
		}
	}
}

func (r *reader) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := Call(ctx, r.in, OpOpen, func() (sink.File, error) { return r.inner.Open(ctx, area, name) },
		func(f sink.File) { _ = f.Close() })
	if err != nil {
		return nil, err
	}
	return &file{File: f, in: r.in}, nil
}

type file struct {
	sink.File
	in *Injector
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	type res struct {
		n   int
		err error
	}
	v, err := Call(nil, f.in, OpReadAt, func() (res, error) {
		n, err := f.File.ReadAt(p, off)
		return res{n, err}, nil
	}, nil)
	if err != nil {
		return 0, err
	}
	return v.n, v.err
}

func (r *reader) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	sw, err := Call(ctx, r.in, OpCreateIn, func() (sink.SegmentWriter, error) { return r.inner.Create(ctx, area, name) },
		func(sw sink.SegmentWriter) { _ = sw.Abort() })
	if err != nil {
		return nil, err
	}
	return &part{SegmentWriter: sw, in: r.in}, nil
}

// part is a segment a wrapped Reader creates.
type part struct {
	sink.SegmentWriter
	in *Injector
}

func (p *part) Write(b []byte) (int, error) {
	n, err := Call(nil, p.in, OpPartWrite, func() (int, error) { return p.SegmentWriter.Write(b) }, nil)
	if err != nil && n == 0 {
		return 0, err
	}
	return n, err
}

func (p *part) Commit(ctx context.Context) error {
	return p.in.Do(ctx, OpPartCommit, func() error { return p.SegmentWriter.Commit(ctx) })
}

func (p *part) Abort() error {
	return p.in.Do(nil, OpPartAbort, p.SegmentWriter.Abort)
}

func (r *reader) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	return r.in.Do(ctx, OpMove, func() error { return r.inner.Move(ctx, name, from, to, reason) })
}

func (r *reader) Delete(ctx context.Context, area sink.Area, name string) error {
	return r.in.Do(ctx, OpDelete, func() error { return r.inner.Delete(ctx, area, name) })
}

func (r *reader) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	type rec struct {
		data    []byte
		version string
	}
	v, err := Call(ctx, r.in, OpReadRecord, func() (rec, error) {
		d, ver, err := r.inner.ReadRecord(ctx, name)
		return rec{d, ver}, err
	}, nil)
	return v.data, v.version, err
}

func (r *reader) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	return Call(ctx, r.in, OpWriteRecord, func() (string, error) { return r.inner.WriteRecord(ctx, name, data, ifVersion) }, nil)
}

func (r *reader) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	return r.in.Do(ctx, OpDeleteRecord, func() error { return r.inner.DeleteRecord(ctx, name, ifVersion) })
}

func (r *reader) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := r.in.Do(ctx, OpRecordNames, func() error { return nil }); err != nil {
			yield("", err)
			return
		}
		for n, err := range r.inner.RecordNames(ctx) {
			if !yield(n, err) || err != nil {
				return
			}
		}
	}
}

type readerRecoverer struct{ r *reader }

func (rr readerRecoverer) Recover(ctx context.Context) ([]string, error) {
	return Call(ctx, rr.r.in, OpReaderRecov, func() ([]string, error) {
		return rr.r.inner.(sink.Recoverer).Recover(ctx)
	}, nil)
}

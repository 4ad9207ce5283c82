package faults

import (
	"context"
	"iter"

	"github.com/dlqdump/dlqdump/sink"
)

// The operations of a wrapped sink.Reader (the restore side's store) and of
// the Files it opens. Segments created through it count as Segment.*.
const (
	OpList         Op = "Reader.List"
	OpOpen         Op = "Reader.Open"
	OpReaderCreate Op = "Reader.Create"
	OpMove         Op = "Reader.Move"
	OpUnstage      Op = "Reader.Unstage"
	OpNames        Op = "Reader.Names"
	OpTableRead    Op = "Table.ReadRecord"
	OpTableWrite   Op = "Table.WriteRecord"
	OpTableDelete  Op = "Table.DeleteRecord"
	OpTableNames   Op = "Table.RecordNames"
	OpDelete       Op = "Reader.Delete"
	OpReadRecord   Op = "Reader.ReadRecord"
	OpWriteRecord  Op = "Reader.WriteRecord"
	OpDeleteRecord Op = "Reader.DeleteRecord"
	OpRecordNames  Op = "Reader.RecordNames"
	OpReadAt       Op = "File.ReadAt"
	OpFileClose    Op = "File.Close"
	OpReaderRecov  Op = "Reader.Recover"
	OpExists       Op = "Reader.Exists"
	OpDiscard      Op = "Reader.Discard"
	OpNamesAfter   Op = "Reader.NamesAfter"
)

// WrapReader returns r with every call counted by in and failed where in's
// plan says, as WrapWriter does for the dump side: each method of
// sink.Reader, the ReadAt and Close of the Files it opens, the methods of
// the SegmentWriters it creates, and the optional interfaces r implements
// (Recover when it is a sink.Recoverer, Names when it is a sink.NameLister,
// Exists when it is a sink.Prober, Discard when it is a sink.Discarder,
// NamesAfter when it is a sink.NameSeeker, the tables' calls when it is a
// sink.Tables), and no others. A listing (List, Names, RecordNames) is one
// call: Fail yields only the failure, Lost lists everything first and then
// yields only the failure.
func WrapReader(r sink.Reader, in *Injector) sink.Reader {
	return composeReader(&reader{inner: r, in: in})
}

// readerTables hands out a wrapped Reader's tables, their calls counted.
type readerTables struct{ r *reader }

func (rt readerTables) Table(name string) (sink.Records, error) {
	t, err := rt.r.inner.(sink.Tables).Table(name)
	if err != nil {
		return nil, err
	}
	return &table{inner: t, in: rt.r.in}, nil
}

// table is a table whose calls are counted.
type table struct {
	inner sink.Records
	in    *Injector
}

func (t *table) ReadRecord(ctx context.Context, key string) ([]byte, string, error) {
	rec, err := Call(ctx, t.in, OpTableRead, func() (record, error) {
		data, version, err := t.inner.ReadRecord(ctx, key)
		return record{data, version}, err
	}, nil)
	return rec.data, rec.version, err
}

func (t *table) WriteRecord(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	return Call(ctx, t.in, OpTableWrite, func() (string, error) { return t.inner.WriteRecord(ctx, key, data, ifVersion) }, nil)
}

func (t *table) DeleteRecord(ctx context.Context, key, ifVersion string) error {
	return t.in.Do(ctx, OpTableDelete, func() error { return t.inner.DeleteRecord(ctx, key, ifVersion) })
}

func (t *table) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return listing(ctx, t.in, OpTableNames, func() iter.Seq2[string, error] { return t.inner.RecordNames(ctx) })
}

// readerNames forwards a wrapped Reader's Names, counted.
type readerNames struct{ r *reader }

func (rn readerNames) Names(ctx context.Context, area sink.Area) iter.Seq2[string, error] {
	return listing(ctx, rn.r.in, OpNames, func() iter.Seq2[string, error] { return rn.r.inner.(sink.NameLister).Names(ctx, area) })
}

// readerSeeker forwards a wrapped Reader's NamesAfter, counted.
type readerSeeker struct{ r *reader }

func (rs readerSeeker) NamesAfter(ctx context.Context, area sink.Area, after string) iter.Seq2[string, error] {
	return listing(ctx, rs.r.in, OpNamesAfter, func() iter.Seq2[string, error] {
		return rs.r.inner.(sink.NameSeeker).NamesAfter(ctx, area, after)
	})
}

// readerRecoverer forwards a wrapped Reader's Recover, counted.
type readerRecoverer struct{ r *reader }

func (rr readerRecoverer) Recover(ctx context.Context) ([]string, error) {
	return Call(ctx, rr.r.in, OpReaderRecov, func() ([]string, error) {
		return rr.r.inner.(sink.Recoverer).Recover(ctx)
	}, nil)
}

// readerProber forwards a wrapped Reader's Exists, counted.
type readerProber struct{ r *reader }

func (rp readerProber) Exists(ctx context.Context, area sink.Area, name string) (bool, error) {
	return Call(ctx, rp.r.in, OpExists, func() (bool, error) {
		return rp.r.inner.(sink.Prober).Exists(ctx, area, name)
	}, nil)
}

// readerDiscarder forwards a wrapped Reader's Discard, counted.
type readerDiscarder struct{ r *reader }

func (rd readerDiscarder) Discard(ctx context.Context, area sink.Area, names ...string) error {
	return rd.r.in.Do(ctx, OpDiscard, func() error { return rd.r.inner.(sink.Discarder).Discard(ctx, area, names...) })
}

type reader struct {
	inner sink.Reader
	in    *Injector
}

func (r *reader) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return listing(ctx, r.in, OpList, func() iter.Seq2[sink.Info, error] { return r.inner.List(ctx, area) })
}

func (r *reader) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return listing(ctx, r.in, OpRecordNames, func() iter.Seq2[string, error] { return r.inner.RecordNames(ctx) })
}

// listing runs a listing as one call: it is collected whole, under the plan,
// and then yielded.
func listing[T any](ctx context.Context, in *Injector, op Op, list func() iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		type item struct {
			v   T
			err error
		}
		items, err := Call(ctx, in, op, func() ([]item, error) {
			var out []item
			for v, err := range list() {
				out = append(out, item{v, err})
				if err != nil {
					return out, nil // the listing's own failure, yielded in place
				}
			}
			return out, nil
		}, nil)
		if err != nil {
			var zero T
			yield(zero, err)
			return
		}
		for _, it := range items {
			if !yield(it.v, it.err) {
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
	return &file{inner: f, in: r.in}, nil
}

func (r *reader) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	sw, err := Call(ctx, r.in, OpReaderCreate, func() (sink.SegmentWriter, error) { return r.inner.Create(ctx, area, name) },
		func(sw sink.SegmentWriter) { _ = sw.Abort() })
	if err != nil {
		return nil, err
	}
	return composeSegment(&segmentWriter{inner: sw, in: r.in}), nil
}

func (r *reader) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	return r.in.Do(ctx, OpMove, func() error { return r.inner.Move(ctx, name, from, to, reason) })
}

func (r *reader) Unstage(ctx context.Context, staged, name string, to sink.Area, reason string) error {
	return r.in.Do(ctx, OpUnstage, func() error { return r.inner.Unstage(ctx, staged, name, to, reason) })
}

func (r *reader) Delete(ctx context.Context, area sink.Area, name string) error {
	return r.in.Do(ctx, OpDelete, func() error { return r.inner.Delete(ctx, area, name) })
}

type record struct {
	data    []byte
	version string
}

func (r *reader) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	rec, err := Call(ctx, r.in, OpReadRecord, func() (record, error) {
		data, version, err := r.inner.ReadRecord(ctx, name)
		return record{data, version}, err
	}, nil)
	return rec.data, rec.version, err
}

// WriteRecord writes the record. A Lost fault writes it and reports
// failure: the caller does not learn the new version.
func (r *reader) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	return Call(ctx, r.in, OpWriteRecord, func() (string, error) { return r.inner.WriteRecord(ctx, name, data, ifVersion) }, nil)
}

func (r *reader) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	return r.in.Do(ctx, OpDeleteRecord, func() error { return r.inner.DeleteRecord(ctx, name, ifVersion) })
}

// file is an opened segment whose reads are counted.
type file struct {
	inner sink.File
	in    *Injector
}

// ReadAt reads p at off. A Lost fault reads and reports 0 bytes and the
// failure.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	return Call(nil, f.in, OpReadAt, func() (int, error) { return f.inner.ReadAt(p, off) }, nil)
}

func (f *file) Size() int64 { return f.inner.Size() }

func (f *file) Close() error { return f.in.Do(nil, OpFileClose, f.inner.Close) }

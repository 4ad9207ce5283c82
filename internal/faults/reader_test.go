package faults

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// memReader is a sink.Reader over a map, enough to see calls go through.
type memReader struct {
	segs    map[string][]byte
	records map[string]string
	writes  int
}

func (m *memReader) List(context.Context, sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		for _, n := range []string{"a.dlq", "b.dlq"} {
			if _, ok := m.segs[n]; ok && !yield(sink.Info{Name: n, Size: int64(len(m.segs[n]))}, nil) {
				return
			}
		}
	}
}

func (m *memReader) Open(_ context.Context, _ sink.Area, name string) (sink.File, error) {
	b, ok := m.segs[name]
	if !ok {
		return nil, sink.ErrNotFound
	}
	return memFile(b), nil
}

func (m *memReader) Create(context.Context, sink.Area, string) (sink.SegmentWriter, error) {
	return &fakeSegment{}, nil
}
func (m *memReader) Move(context.Context, string, sink.Area, sink.Area, string) error { return nil }
func (m *memReader) Unstage(context.Context, string, string, sink.Area, string) error { return nil }
func (m *memReader) Delete(_ context.Context, _ sink.Area, name string) error {
	delete(m.segs, name)
	return nil
}
func (m *memReader) ReadRecord(_ context.Context, name string) ([]byte, string, error) {
	v, ok := m.records[name]
	if !ok {
		return nil, "", sink.ErrNotFound
	}
	return []byte(v), v, nil
}
func (m *memReader) WriteRecord(_ context.Context, name string, data []byte, ifVersion string) (string, error) {
	if m.records[name] != ifVersion {
		return "", sink.ErrConflict
	}
	m.writes++
	m.records[name] = string(data)
	return string(data), nil
}
func (m *memReader) DeleteRecord(context.Context, string, string) error { return nil }
func (m *memReader) RecordNames(context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for n := range m.records {
			if !yield(n, nil) {
				return
			}
		}
	}
}

type memFile []byte

func (f memFile) ReadAt(p []byte, off int64) (int, error) { return copy(p, f[off:]), nil }
func (f memFile) Size() int64                             { return int64(len(f)) }
func (f memFile) Close() error                            { return nil }

// The restore side's store is wrapped the same way: a lost WriteRecord
// happened and its retry, made with the version the caller knew, meets a
// conflict (which the claim protocol must take for its own success); a
// failed listing yields only the failure; reads are counted.
func TestWrapReader(t *testing.T) {
	ctx := context.Background()
	m := &memReader{segs: map[string][]byte{"a.dlq": []byte("hello"), "b.dlq": []byte("x")}, records: map[string]string{}}
	in := New(Point{Op: OpWriteRecord, K: 1, Mode: Lost}, Point{Op: OpList, K: 1, Mode: Fail}, Point{Op: OpReadAt, K: 2, Mode: Fail})
	r := WrapReader(m, in)
	if _, err := r.WriteRecord(ctx, "a.dlq", []byte("v1"), ""); !errors.Is(err, ErrInjected) || m.writes != 1 {
		t.Fatalf("lost WriteRecord: %v, %d writes", err, m.writes)
	}
	if _, err := r.WriteRecord(ctx, "a.dlq", []byte("v1"), ""); !errors.Is(err, sink.ErrConflict) {
		t.Fatalf("retried WriteRecord: %v, want a conflict", err)
	}
	var listed []string
	for info, err := range r.List(ctx, sink.AreaReady) {
		listed = append(listed, fmt.Sprintf("%q %v", info.Name, errors.Is(err, ErrInjected)))
	}
	if len(listed) != 1 || listed[0] != `"" true` {
		t.Fatalf("failed List yielded %q", listed)
	}
	listed = listed[:0]
	for info, err := range r.List(ctx, sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, info.Name)
	}
	if len(listed) != 2 {
		t.Fatalf("List yielded %q", listed)
	}
	f, err := r.Open(ctx, sink.AreaReady, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ReadAt(buf, 0); n != 0 || !errors.Is(err, ErrInjected) {
		t.Fatalf("failed ReadAt: %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := Counts{OpWriteRecord: 2, OpList: 2, OpOpen: 1, OpReadAt: 2, OpFileClose: 1}
	if got := in.Counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

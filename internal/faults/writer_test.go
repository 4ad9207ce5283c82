package faults

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// fakeWriter is a Writer with no optional interface; its segments record
// their calls.
type fakeWriter struct {
	segs []*fakeSegment
}

func (w *fakeWriter) Create(_ context.Context, name string) (sink.SegmentWriter, error) {
	s := &fakeSegment{name: name}
	w.segs = append(w.segs, s)
	return s, nil
}

type fakeSegment struct {
	name                   string
	data                   []byte
	commits, aborts, close int
}

func (s *fakeSegment) Write(p []byte) (int, error) { s.data = append(s.data, p...); return len(p), nil }
func (s *fakeSegment) Sync() error                 { return nil }
func (s *fakeSegment) Truncate(n int64) error      { s.data = s.data[:n]; return nil }
func (s *fakeSegment) Commit(context.Context) error {
	s.commits++
	return nil
}
func (s *fakeSegment) Abort() error { s.aborts++; return nil }
func (s *fakeSegment) Close() error { s.close++; return nil }

// Writers with some optional interfaces.
type (
	recovering struct{ fakeWriter }
	watching   struct{ fakeWriter }
	full       struct{ fakeWriter }
	backlogged struct{ fakeWriter }
)

func (*recovering) Recover(context.Context) ([]string, error) { return []string{"a"}, nil }
func (*watching) Backlog() int64                              { return 7 }
func (*watching) WatchBacklog() sink.Backlog                  { return sink.Backlog{Segments: 1} }
func (*watching) Close(context.Context) error                 { return nil }
func (*backlogged) Backlog() int64                            { return 7 }
func (*full) Recover(context.Context) ([]string, error)       { return nil, nil }
func (*full) Backlog() int64                                  { return 7 }
func (*full) WatchBacklog() sink.Backlog                      { return sink.Backlog{} }
func (*full) Flush(context.Context) error                     { return nil }
func (*full) Close(context.Context) error                     { return nil }
func (*full) CheckDurable() error                             { return nil }

// optionalWriterInterfaces are the optional interfaces of a sink.Writer that
// WrapWriter forwards. TestWrapperKnowsEveryOptionalInterface keeps the list
// equal to the interfaces declared in sink/writer.go.
var optionalWriterInterfaces = map[string]reflect.Type{
	"Recoverer":         reflect.TypeFor[sink.Recoverer](),
	"Backlogger":        reflect.TypeFor[sink.Backlogger](),
	"BacklogWatcher":    reflect.TypeFor[sink.BacklogWatcher](),
	"Flusher":           reflect.TypeFor[sink.Flusher](),
	"Closer":            reflect.TypeFor[sink.Closer](),
	"DurabilityChecker": reflect.TypeFor[sink.DurabilityChecker](),
}

// The wrapper implements exactly the optional interfaces of the Writer it
// wraps.
func TestWrapWriterForwardsOptionalInterfaces(t *testing.T) {
	for _, w := range []sink.Writer{&fakeWriter{}, &recovering{}, &watching{}, &backlogged{}, &full{}} {
		wrapped := WrapWriter(w, New())
		for name, it := range optionalWriterInterfaces {
			want := reflect.TypeOf(w).Implements(it)
			if got := reflect.TypeOf(wrapped).Implements(it); got != want {
				t.Errorf("%T: wrapper implements %s: %v, the Writer: %v", w, name, got, want)
			}
		}
	}
}

// Every interface declared in sink/writer.go besides Writer and
// SegmentWriter is one WrapWriter forwards: a new optional interface fails
// this test until gen_compose.go learns it.
func TestWrapperKnowsEveryOptionalInterface(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../sink/writer.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.Name != "Writer" && ts.Name.Name != "SegmentWriter" {
				declared = append(declared, ts.Name.Name)
			}
		}
		return true
	})
	var known []string
	for name := range optionalWriterInterfaces {
		known = append(known, name)
	}
	slices.Sort(declared)
	slices.Sort(known)
	if !slices.Equal(declared, known) {
		t.Fatalf("sink/writer.go declares the optional interfaces %v; WrapWriter forwards %v: add a forwarder (writer.go, gen_compose.go, go generate)", declared, known)
	}
}

func TestWrapWriterCountsAndFails(t *testing.T) {
	ctx := context.Background()
	inner := &fakeWriter{}
	in := New(Point{Op: OpCommit, K: 1, Mode: Lost}, Point{Op: OpCreate, K: 2, Mode: Lost}, Point{Op: OpWrite, K: 1, Mode: Fail})
	w := WrapWriter(inner, in)
	sw, err := w.Create(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sw.(io.Closer); !ok {
		t.Fatal("the segment wrapper hides io.Closer")
	}
	if n, err := sw.Write([]byte("xy")); n != 0 || !errors.Is(err, ErrInjected) || len(inner.segs[0].data) != 0 {
		t.Fatalf("failed Write: %d, %v, wrote %q", n, err, inner.segs[0].data)
	}
	if _, err := sw.Write([]byte("xy")); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(ctx); !errors.Is(err, ErrInjected) || inner.segs[0].commits != 1 {
		t.Fatalf("lost Commit: %v, %d commits made", err, inner.segs[0].commits)
	}
	if err := sw.Commit(ctx); err != nil || inner.segs[0].commits != 2 {
		t.Fatalf("retried Commit: %v, %d commits made", err, inner.segs[0].commits)
	}
	// A lost Create made the segment and released it unseen.
	if sw, err := w.Create(ctx, "b.dlq"); sw != nil || !errors.Is(err, ErrInjected) || len(inner.segs) != 2 || inner.segs[1].close != 1 {
		t.Fatalf("lost Create: %v, %v; segments %d", sw, err, len(inner.segs))
	}
	want := Counts{OpCreate: 2, OpWrite: 2, OpCommit: 2}
	if got := in.Counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	names, err := WrapWriter(&recovering{}, in).(sink.Recoverer).Recover(ctx)
	if err != nil || len(names) != 1 || in.Counts()[OpRecover] != 1 {
		t.Fatalf("Recover: %v, %v, counts %v", names, err, in.Counts())
	}
}

// ReleaseSegments closes the segments dropped unfinished, as the end of the
// process would, and only those.
func TestReleaseSegments(t *testing.T) {
	ctx := context.Background()
	inner := &fakeWriter{}
	in := New(Point{Op: OpAbort, K: 1, Mode: Fail})
	w := WrapWriter(inner, in)
	for _, name := range []string{"committed.dlq", "dropped.dlq", "aborted.dlq"} {
		sw, err := w.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "committed.dlq":
			if err := sw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		case "dropped.dlq":
			if err := sw.Abort(); !errors.Is(err, ErrInjected) {
				t.Fatalf("Abort: %v", err)
			}
		case "aborted.dlq":
			if err := sw.Abort(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := ReleaseSegments(w); n != 1 || inner.segs[1].close != 1 || inner.segs[0].close+inner.segs[2].close != 0 {
		t.Fatalf("released %d; closes %d %d %d", n, inner.segs[0].close, inner.segs[1].close, inner.segs[2].close)
	}
	if n := ReleaseSegments(w); n != 0 {
		t.Fatalf("released %d again", n)
	}
}

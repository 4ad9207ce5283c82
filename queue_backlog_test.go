package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/sink"
	dlqsink "github.com/dlqdump/dlqdump/sink"
)

// heldWriter is a Writer that stores committed segments later, like an S3
// Writer's spool: Commit keeps a segment in memory (the backlog) until the
// test calls store. It implements sink.BacklogWatcher, Flusher and Closer.
type heldWriter struct {
	mu       sync.Mutex
	held     []int64 // sizes of the committed segments not stored, oldest first
	stored   int
	changed  chan struct{}
	watched  chan struct{} // a value each time WatchBacklog hands out changed
	flushing chan struct{} // a value each time Flush starts
	closeFn  func(ctx context.Context) error
	closeErr error
}

func newHeldWriter() *heldWriter {
	return &heldWriter{changed: make(chan struct{}), watched: make(chan struct{}, 64), flushing: make(chan struct{}, 1)}
}

func (w *heldWriter) Create(context.Context, string) (sink.SegmentWriter, error) {
	return &heldSegment{w: w}, nil
}

func (w *heldWriter) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// store stores the n oldest committed segments, all of them if n < 0.
func (w *heldWriter) store(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n < 0 {
		n = len(w.held)
	}
	w.held = w.held[n:]
	w.stored += n
	w.notifyLocked()
}

func (w *heldWriter) Backlog() int64 { return w.WatchBacklog().Bytes }

func (w *heldWriter) WatchBacklog() dlqsink.Backlog {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b int64
	for _, n := range w.held {
		b += n
	}
	select {
	case w.watched <- struct{}{}:
	default:
	}
	return dlqsink.Backlog{Segments: len(w.held), Bytes: b, Changed: w.changed}
}

func (w *heldWriter) Flush(ctx context.Context) error {
	select {
	case w.flushing <- struct{}{}:
	default:
	}
	for {
		w.mu.Lock()
		n, ch := len(w.held), w.changed
		w.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d segments not stored: %w", n, ctx.Err())
		}
	}
}

func (w *heldWriter) Close(ctx context.Context) error {
	if w.closeFn != nil {
		return w.closeFn(ctx)
	}
	return w.Flush(ctx)
}

type heldSegment struct {
	w   *heldWriter
	buf []byte
}

func (s *heldSegment) Write(p []byte) (int, error) { s.buf = append(s.buf, p...); return len(p), nil }
func (s *heldSegment) Sync() error                 { return errors.New("memory") }
func (s *heldSegment) Truncate(n int64) error      { s.buf = s.buf[:n]; return nil }
func (s *heldSegment) Abort() error                { s.buf = nil; return nil }
func (s *heldSegment) Commit(context.Context) error {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	s.w.held = append(s.w.held, int64(len(s.buf)))
	s.w.notifyLocked()
	return nil
}

// An Enqueue waiting for room held by the Writer's backlog returns as soon as
// the backlog shrinks (issue 11, defect 9), not after EnqueueTimeout (an hour
// here).
func TestEnqueueWakesWhenBacklogShrinks(t *testing.T) {
	w := newHeldWriter()
	q := newQueue(t, dlqdump.Config{Writer: w, MaxPending: 64 * dlqdump.Kilobyte, EnqueueTimeout: time.Hour,
		FlushInterval: time.Hour, Codec: dlqdump.NoCompression})
	defer func() {
		go func() {
			<-w.flushing // Close waits for what the Writer holds: store it
			w.store(-1)
		}()
		if err := q.Close(); err != nil {
			t.Error(err)
		}
	}()
	for i := range 50 {
		if err := q.Enqueue(fmt.Sprintf("%03d%s", i, strings.Repeat("x", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-w.flushing // the segment is committed; the Writer holds it
		cancel()
	}()
	if err := q.Flush(ctx); !errors.Is(err, dlqdump.ErrNotStored) || !strings.Contains(err.Error(), "1 segments not stored") {
		t.Fatalf("Flush with the segment held by the Writer = %v, want ErrNotStored", err)
	}
	if st := q.Stats(); st.Segments != 1 || st.Stored != 0 || st.Backlog < 50*1000 || st.Pending != 0 {
		t.Fatalf("Stats = %+v, want 1 segment committed, none stored, its bytes in the backlog", st)
	}
	for len(w.watched) > 0 {
		<-w.watched
	}
	res := make(chan error, 1)
	go func() { res <- q.Enqueue(strings.Repeat("y", 20000)) }() // fits only once the backlog shrinks
	// The Enqueue looks at the backlog twice: a first check, then the
	// check after which it waits, with the backlog's Changed channel.
	<-w.watched
	<-w.watched
	select {
	case err := <-res:
		t.Fatalf("Enqueue returned %v while the backlog held the room", err)
	default:
	}
	w.store(1)
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Enqueue still waiting a minute after the backlog drained; EnqueueTimeout is an hour")
	}
	if st := q.Stats(); st.Segments != 1 || st.Stored != 1 {
		t.Fatalf("Stats = %+v, want the segment stored", st)
	}
}

// Close waits for the Writer to store what it holds: it returns only once
// the Writer's Close does, and then every segment is stored.
func TestCloseWaitsForTheWriter(t *testing.T) {
	w := newHeldWriter()
	q := newQueue(t, dlqdump.Config{Writer: w})
	for i := range 100 {
		if err := q.Enqueue(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	res := make(chan error, 1)
	go func() { res <- q.Close() }()
	for {
		<-w.watched // Close is waiting on the backlog, or the loop looks at it
		w.mu.Lock()
		n := len(w.held)
		w.mu.Unlock()
		if n > 0 {
			break
		}
	}
	select {
	case err := <-res:
		t.Fatalf("Close returned %v with a segment not stored", err)
	default:
	}
	w.store(1)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Segments != 1 || st.Stored != 1 || st.Records != 100 {
		t.Fatalf("Stats after Close = %+v", st)
	}
}

// A Writer whose Close never returns cannot hold Shutdown past its deadline;
// the records it holds are counted in doubt: it may still store them (see
// also TestFaultsShutdownCountsHeldSegmentsOfHungWriterInDoubt).
func TestShutdownBoundedWhenWriterCloseHangs(t *testing.T) {
	hang := newGate(t)
	w := newHeldWriter()
	w.closeFn = func(context.Context) error { hang.wait(); return nil }
	q := newQueue(t, dlqdump.Config{Writer: w})
	for i := range 30 {
		if err := q.Enqueue(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	se := shutdownError(t, shutdownWithin(t, q, 300*time.Millisecond))
	if se.InDoubt != 30 || se.Held != 0 || se.NotWritten != 0 {
		t.Fatalf("Shutdown counted %+v, want the 30 records of the segment the hung Writer holds in doubt", *se)
	}
}

// backlogOnly is a third-party Writer that implements sink.Backlogger and
// nothing else optional: it says its backlog only when asked.
type backlogOnly struct{ w *heldWriter }

func (b backlogOnly) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	return b.w.Create(ctx, name)
}

func (b backlogOnly) Backlog() int64 { return b.w.Backlog() }

// Issue 19: an Enqueue waiting for room held by the backlog of a Writer that
// is only a Backlogger polls the backlog while it waits, so it returns soon
// after the backlog drained, not after EnqueueTimeout (an hour here).
func TestEnqueuePollsBackloggerBacklog(t *testing.T) {
	w := newHeldWriter()
	q := newQueue(t, dlqdump.Config{Writer: backlogOnly{w}, MaxPending: 64 * dlqdump.Kilobyte, EnqueueTimeout: time.Hour,
		FlushInterval: time.Hour, Codec: dlqdump.NoCompression})
	defer func() {
		w.store(-1)
		if err := q.Close(); err != nil {
			t.Error(err)
		}
	}()
	for i := range 50 {
		if err := q.Enqueue(fmt.Sprintf("%03d%s", i, strings.Repeat("x", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Segments != 1 || st.Backlog < 50*1000 || st.Pending != 0 {
		t.Fatalf("Stats = %+v, want 1 segment committed, its bytes in the backlog", st)
	}
	for len(w.watched) > 0 {
		<-w.watched
	}
	res := make(chan error, 1)
	go func() { res <- q.Enqueue(strings.Repeat("y", 20000)) }() // fits only once the backlog drains
	// The Enqueue looks at the backlog twice (a first check, then the
	// check after which it waits) and then waits.
	<-w.watched
	<-w.watched
	select {
	case err := <-res:
		t.Fatalf("Enqueue returned %v while the backlog held the room", err)
	default:
	}
	w.store(1)
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Enqueue still waiting a minute after the backlog drained; EnqueueTimeout is an hour")
	}
}

package dlqdump_test

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// cancelOnNth is an in-process destination (a queue that knows nothing of
// contexts): it accepts everything and cancels the pass's context when it
// accepts its n-th item.
type cancelOnNth struct {
	mu     sync.Mutex
	n      int
	got    map[string]int
	k      int
	cancel context.CancelFunc
}

func (d *cancelOnNth) Enqueue(x any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got[x.(string)]++
	d.k++
	if d.k == d.n {
		d.cancel()
	}
	return nil
}

// A pass cancelled in the middle of a block does not stop at the next
// record: deliver checks the context only when the destination refuses, so
// the rest of the block is delivered; then the block's checkpoint is written
// with the cancelled context, which a sink that honours its context (S3,
// memsink) refuses; the error is returned as is (not through stop), and
// release() writes the last checkpoint written, the one before the block.
// The next pass delivers the whole block again: issue 12 defect 2, on any
// sink but fs.
func TestReviewCancelledMidBlockRepeatsTheBlock(t *testing.T) {
	st := memsink.New()
	items := itemsN("c", 5000)
	q := newQueue(t, dlqdump.Config{Writer: st.Writer(), Capacity: 64 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte})
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	ctx, cancel := context.WithCancel(t.Context())
	d := &cancelOnNth{n: 777, got: got, cancel: cancel}
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: d})
	_, err := r.Run(ctx, dlqdump.RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Logf("cancelled pass: %v", err)
	}
	first := d.k
	r2 := newRestorer(t, dlqdump.Config{Reader: st, Queue: d})
	d.mu.Lock()
	d.n = -1
	d.mu.Unlock()
	if err := r2.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, it := range items {
		if got[it] == 0 {
			t.Fatalf("%s never delivered", it)
		}
		dups += got[it] - 1
	}
	if n := len(st.Names(sink.AreaReady)); n != 0 {
		t.Fatalf("%d segments left", n)
	}
	if dups > 0 {
		t.Fatalf("cancelled after the %dth delivery (the pass went on to %d): %d records delivered twice", 777, first, dups)
	}
}

// The same on S3 (an in-process gofakes3): a PutObject with a cancelled
// context fails at once.
func TestReviewCancelledMidBlockRepeatsTheBlockS3(t *testing.T) {
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	prefix := s3test.UniquePrefix(t.Name())
	items := itemsN("c", 5000)
	q := newQueue(t, dlqdump.Config{Writer: &s3.Writer{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix},
		Capacity: 64 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte})
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	rd := &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix}
	got := map[string]int{}
	ctx, cancel := context.WithCancel(t.Context())
	d := &cancelOnNth{n: 777, got: got, cancel: cancel}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: d})
	_, _ = r.Run(ctx, dlqdump.RunOptions{})
	first := d.k
	d.mu.Lock()
	d.n = -1
	d.mu.Unlock()
	r2 := newRestorer(t, dlqdump.Config{Reader: rd, Queue: d})
	if err := r2.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, it := range items {
		if got[it] == 0 {
			t.Fatalf("%s never delivered", it)
		}
		dups += got[it] - 1
	}
	if dups > 0 {
		t.Fatalf("cancelled after the %dth delivery (the pass went on to %d): %d records delivered twice", 777, first, dups)
	}
}

// blackHole is an fs.Reader whose List of the ready area, after its first
// call, waits for its context (a store that stopped answering: a
// black-holed S3 endpoint, where each attempt waits for its timeout), or for
// the test's end.
type blackHole struct {
	*fs.Reader
	mu    sync.Mutex
	calls int
	end   chan struct{}
}

func (b *blackHole) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	b.mu.Lock()
	if area == sink.AreaReady {
		b.calls++ // the listings of a refresh run at once, in any order
	}
	first := b.calls == 1 || area != sink.AreaReady
	b.mu.Unlock()
	if first {
		return b.Reader.List(ctx, area)
	}
	return func(yield func(sink.Info, error) bool) {
		select {
		case <-ctx.Done():
			yield(sink.Info{}, ctx.Err())
		case <-b.end:
			yield(sink.Info{}, errors.New("test over"))
		}
	}
}

// Run documents that a pass stopped by its context records where it stopped
// with a short deadline of its own and returns the context's error. But
// after the pass, Run's deferred refresh lists the store again with
// context.WithoutCancel(ctx): no deadline at all. A store that stops
// answering (S3: five attempts of up to a minute each, per call) keeps a
// cancelled Run, and a CLI's Ctrl-C, from returning.
func TestReviewCancelledRunReturnsPromptly(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, itemsN("h", 100))
	bh := &blackHole{Reader: &fs.Reader{Directory: dir}, end: make(chan struct{})}
	defer close(bh.end)
	ctx, cancel := context.WithCancel(t.Context())
	d := &cancelOnNth{n: 10, got: map[string]int{}, cancel: cancel}
	r := newRestorer(t, dlqdump.Config{Reader: bh, Queue: d})
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, dlqdump.RunOptions{})
		done <- err
	}()
	<-ctx.Done()
	select {
	case err := <-done:
		t.Logf("cancelled Run returned %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled Run has not returned 5s after its context was cancelled: its deferred refresh waits on the store without a deadline")
	}
}

// deliver looks at the pass's context only when the destination refuses: a
// destination that does not know the context (an in-process queue) keeps
// receiving the rest of the block after the pass was cancelled (and after
// Close, which cancels it too), up to a whole block (thousands of records
// at the default BlockSize) where the design says a cancellation stops at
// the next record.
func TestReviewCancelledPassStopsAtTheNextRecord(t *testing.T) {
	st := memsink.New()
	q := newQueue(t, dlqdump.Config{Writer: st.Writer(), Capacity: 64 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte})
	for _, it := range itemsN("c", 2000) {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	d := &cancelOnNth{n: 777, got: map[string]int{}, cancel: cancel}
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: d})
	_, _ = r.Run(ctx, dlqdump.RunOptions{})
	if d.k != 777 {
		t.Fatalf("cancelled at the 777th delivery, the pass delivered %d", d.k)
	}
}

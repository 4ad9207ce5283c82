package inspect

import (
	"context"
	"fmt"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func recordOf(payload string) segment.Record {
	return segment.Record{Payload: []byte(payload)}
}

// store writes n records (payload "record i", header n=i) into one segment
// of many small blocks.
func store(t *testing.T, n int) (*memsink.Store, sink.Info) {
	t.Helper()
	st := memsink.New()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: st.Writer(), Capacity: 64 * dlqdump.Megabyte, BlockSize: dlqdump.Kilobyte})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("record %d", i), Headers: dlqdump.Headers{"n": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	for si, err := range st.List(context.Background(), sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		return st, si
	}
	t.Fatal("no segment")
	return nil, sink.Info{}
}

// Walks from a record, with and without read-ahead, give every record from
// there once, in order.
func TestWalkFrom(t *testing.T) {
	const n = 3000
	st, si := store(t, n)
	w := &Walker{Reader: st}
	for _, from := range []uint64{0, 1, 77, 1500, n - 1, n, n + 10} {
		for _, stream := range []*segment.StreamOptions{nil, {Workers: 2}} {
			next := from
			blocks := 0
			_, err := w.Walk(context.Background(), si, WalkOpts{From: from, Stream: stream}, func(_ *segment.Header, b *segment.Block) error {
				blocks++
				for i := range b.Len() {
					rec := b.Record(i)
					if rec.Seq < from {
						continue
					}
					if rec.Seq != next || string(rec.Payload) != fmt.Sprintf("record %d", rec.Seq) {
						return fmt.Errorf("record %d (%q), want %d", rec.Seq, rec.Payload, next)
					}
					next++
				}
				return nil
			}, func(err error) { t.Errorf("damage: %v", err) })
			if err != nil {
				t.Fatalf("from %d, stream %v: %v", from, stream != nil, err)
			}
			if want := max(from, n); next != want {
				t.Errorf("from %d, stream %v: ended at %d, want %d", from, stream != nil, next, want)
			}
			if from > 0 && from < n && blocks > 1+(n-int(from))/10 {
				t.Errorf("from %d: read %d blocks, want only those from its block on", from, blocks)
			}
		}
	}
}

package dlqdump_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// byteCounter is a store whose segments' bytes read are counted.
type byteCounter struct {
	*memsink.Store
	n atomic.Int64
}

func (c *byteCounter) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := c.Store.Open(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return countedFile{File: f, n: &c.n}, nil
}

type countedFile struct {
	sink.File
	n *atomic.Int64
}

func (f countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

// A selective pass reads only the blocks its selection may select from, by
// the segment's summary: three passes, each over a third of a 3 MB
// segment's records (a batch each), each read about a third of it and
// delivered its batch, once; the last finished the segment. Before, the
// first pass read the whole segment and each later one the whole of what
// the passes before had left (3, 2 and 1 times a third of it, at least).
func TestSelectivePassReadsOnlyTheBlocksItMaySelectFrom(t *testing.T) {
	st := memsink.New()
	const batch = 5000
	q := newQueue(t, dlqdump.Config{Writer: st.Writer(), Capacity: 16 * dlqdump.Megabyte, BlockSize: 16 * dlqdump.Kilobyte})
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 3 * batch {
		item := fmt.Sprintf(`{"order":%d,"note":"%016x%016x%016x%016x%016x%016x%016x%016x"}`, i,
			rnd.Uint64(), rnd.Uint64(), rnd.Uint64(), rnd.Uint64(), rnd.Uint64(), rnd.Uint64(), rnd.Uint64(), rnd.Uint64())
		if err := q.Enqueue(dlqdump.Envelope{Item: item, Headers: dlqdump.Headers{"batch": fmt.Sprint(i / batch)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var size int64
	for info, err := range st.List(context.Background(), sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		size += info.Size
	}
	bc := &byteCounter{Store: st}
	var mu sync.Mutex
	var got []string
	r := newRestorer(t, dlqdump.Config{Reader: bc, Decoder: decoder.Fallthrough{AsString: true}, Queue: queueFunc(func(it any) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, it.(string))
		return nil
	})})
	for i, k := range []int{2, 0, 1} {
		sel, err := selection.Parse(fmt.Sprintf("batch = %d", k), nil)
		if err != nil {
			t.Fatal(err)
		}
		dry, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel, DryRun: true})
		if err != nil || dry.Delivered != batch {
			t.Fatalf("dry run of batch %d: %+v, %v", k, dry, err)
		}
		bc.n.Store(0)
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel})
		if err != nil || rep.Delivered != batch || rep.Skipped != dry.Skipped {
			t.Fatalf("pass over batch %d: %+v, %v (its dry run skipped %d)", k, rep, err, dry.Skipped)
		}
		// A third of the segment, with the blocks either side of the
		// batch, the footer, the summary and the first read's 256 KiB.
		if read := bc.n.Load(); read > size/3+size/8+300<<10 {
			t.Errorf("pass %d over batch %d read %d bytes of a segment of %d", i, k, read, size)
		}
		if left := uint64(3*batch - (i+1)*batch); rep.Skipped > left+2*batch/10 || rep.Skipped < left {
			t.Errorf("pass %d over batch %d left %d records, %d were not its", i, k, rep.Skipped, left)
		}
	}
	if len(got) != 3*batch {
		t.Fatalf("delivered %d records, want %d", len(got), 3*batch)
	}
	slices.Sort(got)
	if len(slices.Compact(got)) != 3*batch {
		t.Fatal("a record was delivered twice")
	}
	for info, err := range st.List(context.Background(), sink.AreaReady) {
		t.Fatalf("segment %s still ready (%v)", info.Name, err)
	}
}

package dlqdump_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// Many selective passes over one store (restore jobs: each its selection,
// each a dry run before its pass) plan each segment from what a Restorer
// read once: after the first pass, a pass opens only the segments its
// selection may select from. Before, every pass opened every segment of
// the store to plan it (here 20 opens per pass, where 1 is read).
func TestSelectivePassesPlanFromWhatWasRead(t *testing.T) {
	st := memsink.New()
	for s := range 20 {
		q := newQueue(t, dlqdump.Config{Writer: st.Writer(), Capacity: dlqdump.Megabyte})
		for i := range 10 {
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%d", s, i), Headers: dlqdump.Headers{"batch": fmt.Sprint(s)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cc := &callCounter{Store: st}
	r := newRestorer(t, dlqdump.Config{Reader: cc, Decoder: decoder.Fallthrough{AsString: true}, Queue: queueFunc(func(any) error { return nil })})
	for k := range 20 {
		sel, err := selection.Parse(fmt.Sprintf("batch = %d", k), nil)
		if err != nil {
			t.Fatal(err)
		}
		cc.opens.Store(0)
		for _, dry := range []bool{true, false} {
			rep, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel, DryRun: dry})
			if err != nil || rep.Delivered != 10 || rep.SkippedSegments != 19-k { // the segments of the batches before are restored
				t.Fatalf("pass %d (dry run %v): %+v, %v", k, dry, rep, err)
			}
		}
		want := int64(2) // the dry run's read and the pass's
		if k == 0 {
			want = 20 + 2 // planned once: every segment
		}
		if n := cc.opens.Load(); n != want {
			t.Fatalf("pass %d and its dry run opened %d segments, want %d", k, n, want)
		}
	}
}

// The Restorers over one Reader (a jobs.Runner's) share what they planned
// the unencrypted segments with: a store is planned once per process, not
// once per Restorer (before, the jobs one-store benchmark's 12 Restorers
// each opened the store's 71 segments to plan them, 12 times the store's
// bytes). An encrypted segment's plan (its sealed summary is read with its
// data key) stays each Restorer's own, and Restorers over another Reader
// plan for themselves.
func TestRestorersOverOneReaderShareTheirPlans(t *testing.T) {
	st := memsink.New()
	dump := func(batch int, enc *dlqdump.Encryption) {
		q := newQueue(t, dlqdump.Config{Writer: st.Writer(), Capacity: dlqdump.Megabyte, Encryption: enc})
		for i := range 10 {
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%d", batch, i), Headers: dlqdump.Headers{"batch": fmt.Sprint(batch)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	id := newIdentity(t)
	for s := range 20 {
		dump(s, nil)
	}
	for s := 20; s < 25; s++ {
		dump(s, &dlqdump.Encryption{Recipients: []envelope.Recipient{id.Recipient()}})
	}
	cc, other := &callCounter{Store: st}, &callCounter{Store: st}
	restorer := func(rd *callCounter) *dlqdump.Restorer {
		return newRestorer(t, dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: queueFunc(func(any) error { return nil }),
			Encryption: &dlqdump.Encryption{Identities: []envelope.Identity{id}}})
	}
	for i, c := range []struct {
		rd    *callCounter
		batch int
		opens int64
	}{
		{cc, 0, 25 + 1},    // the first plans every segment
		{cc, 1, 5 + 1},     // the second, over the same Reader: the encrypted ones only
		{other, 2, 23 + 1}, // over another Reader: every segment left
	} {
		r := restorer(c.rd)
		sel, err := selection.Parse(fmt.Sprintf("batch = %d", c.batch), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.rd.opens.Store(0)
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel})
		if err != nil || rep.Delivered != 10 {
			t.Fatalf("Restorer %d: %+v, %v", i, rep, err)
		}
		if n := c.rd.opens.Load(); n != c.opens {
			t.Errorf("Restorer %d opened %d segments, want %d", i, n, c.opens)
		}
	}
}

// gatedOpens is a store that counts the opens of each segment; the first
// open of segment gated waits for release (entered closed), and its second
// closes second.
type gatedOpens struct {
	*memsink.Store
	gated                   string
	entered, release, again chan struct{}
	mu                      sync.Mutex
	opens                   map[string]int
}

func (g *gatedOpens) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	g.mu.Lock()
	g.opens[name]++
	n := g.opens[name]
	g.mu.Unlock()
	if name == g.gated {
		switch n {
		case 1:
			close(g.entered)
			<-g.release
		case 2:
			close(g.again)
		}
	}
	return g.Store.Open(ctx, area, name)
}

// Restorers sharing their plans that plan one segment at the same moment
// read it once: the second waits for what the first reads. Before, each
// read it (the jobs one-store benchmark's Restorers, starting the jobs due
// at one second together, planned some segments twice: 1.0 to 1.4 times
// the store).
func TestRestorersPlanningOneSegmentAtOnceReadItOnce(t *testing.T) {
	st := memsink.New()
	names, _ := dumpPairs(t, st, 6) // batch 2 in segments 4 and 5
	g := &gatedOpens{Store: st, gated: names[0], entered: make(chan struct{}), release: make(chan struct{}), again: make(chan struct{}), opens: map[string]int{}}
	var delivered atomic.Int64
	restorer := func() *dlqdump.Restorer {
		return newRestorer(t, dlqdump.Config{Reader: g, Queue: queueFunc(func(any) error { delivered.Add(1); return nil })})
	}
	a, b := restorer(), restorer()
	sel := batchSel(t, 2)
	type result struct {
		rep dlqdump.Report
		err error
	}
	results := make(chan result, 2)
	run := func(r *dlqdump.Restorer) {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel})
		results <- result{rep, err}
	}
	go run(a)
	<-g.entered // a reads segment 0 to plan it
	waiting := make(chan struct{})
	var once sync.Once
	defer dlqdump.OnPlanWait(func() { once.Do(func() { close(waiting) }) })()
	go run(b)
	select {
	case <-waiting: // b waits for a's read
	case <-g.again: // b reads it too
	}
	close(g.release)
	for range 2 {
		if res := <-results; res.err != nil {
			t.Fatalf("a pass: %+v, %v", res.rep, res.err)
		}
	}
	if n := delivered.Load(); n != 20 {
		t.Errorf("%d delivered, want batch 2's 20", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.opens[names[0]]; n != 1 {
		t.Errorf("segment 0 was opened %d times to plan it, want 1", n)
	}
}

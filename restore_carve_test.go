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
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// carveStore dumps one segment of n records whose header batch is i%batches
// (interleaved).
func carveStore(t *testing.T, n, batches int) *memsink.Store {
	t.Helper()
	st := memsink.New()
	q := newQueue(t, dlqdump.Config{Writer: st.Writer()})
	for i := range n {
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%03d", i%batches, i), Headers: dlqdump.Headers{"batch": fmt.Sprint(i % batches)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if names := st.Names(sink.AreaReady); len(names) != 1 {
		t.Fatalf("dumped %d segments, want one", len(names))
	}
	return st
}

// carveDest records what a destination accepted; first is closed at its
// first record, and each record after the first waits for gate (when not
// nil) to be closed.
type carveDest struct {
	mu    sync.Mutex
	got   []string
	once  sync.Once
	first chan struct{}
	gate  chan struct{}
	stop  context.Context
}

func newCarveDest(gate chan struct{}) *carveDest {
	return &carveDest{first: make(chan struct{}), gate: gate, stop: context.Background()}
}

func (c *carveDest) Enqueue(x any) error {
	c.mu.Lock()
	n := len(c.got)
	c.mu.Unlock()
	if n > 0 && c.gate != nil {
		select {
		case <-c.gate:
		case <-c.stop.Done():
			return dlqdump.ErrUnavailable
		}
	}
	c.mu.Lock()
	c.got = append(c.got, x.(string))
	c.mu.Unlock()
	c.once.Do(func() { close(c.first) })
	return nil
}

func (c *carveDest) items() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// Two slow passes whose selections are disjoint, over one segment holding
// both's records interleaved, deliver at the same time: with Carve the
// first holds the segment only while it copies its records out, so the
// second delivers its first record while the first still has all but one
// of its 20 left (the first's destination holds its second record until
// then). Without Carve the second waits for the first to let the segment go
// (WaitClaimed), which it never does while its delivery is held. Stopped
// there, the passes leave the rest where a plain pass finds it: each record
// is delivered once.
func TestCarvingPassesDeliverAtOnce(t *testing.T) {
	st := carveStore(t, 40, 2)
	gate := make(chan struct{})
	a, b := newCarveDest(gate), newCarveDest(nil)
	stopA, cancelA := context.WithCancelCause(context.Background())
	stopB, cancelB := context.WithCancelCause(context.Background())
	defer cancelA(nil)
	defer cancelB(nil)
	a.stop = stopA
	ra := newRestorer(t, dlqdump.Config{Reader: st, Queue: a, Owner: "job-a"})
	rb := newRestorer(t, dlqdump.Config{Reader: st, Queue: b, Owner: "job-b"})
	opts := func(batch string, stop context.Context) dlqdump.RunOptions {
		return dlqdump.RunOptions{Where: dlqdump.Headers{"batch": batch}, Rate: 2, Carve: true, WaitClaimed: time.Hour, Stop: stop}
	}
	type result struct {
		rep dlqdump.Report
		err error
	}
	doneA, doneB := make(chan result, 1), make(chan result, 1)
	go func() {
		rep, err := ra.Run(context.Background(), opts("0", stopA))
		doneA <- result{rep, err}
	}()
	<-a.first
	go func() {
		rep, err := rb.Run(context.Background(), opts("1", stopB))
		doneB <- result{rep, err}
	}()
	select {
	case <-b.first:
	case res := <-doneB:
		t.Fatalf("the second pass ended (%+v, %v) before delivering", res.rep, res.err)
	case <-time.After(time.Minute): // a failure's bound only
		t.Fatalf("the second pass delivered nothing in a minute while the first held its second record (first delivered %d)", len(a.items()))
	}
	if n := len(a.items()); n != 1 {
		t.Fatalf("the first pass delivered %d records before the second's first; its destination holds all but one", n)
	}
	paused := errors.New("paused")
	cancelB(paused)
	cancelA(paused)
	close(gate)
	resA, resB := <-doneA, <-doneB
	for _, res := range []result{resA, resB} {
		if res.err != nil && !errors.Is(res.err, paused) {
			t.Fatalf("a carving pass: %+v, %v", res.rep, res.err)
		}
	}
	if resA.rep.Carved != 20 || resB.rep.Carved != 20 {
		t.Fatalf("carved %d and %d records, want 20 each", resA.rep.Carved, resB.rep.Carved)
	}
	rest := newCarveDest(nil)
	rr := newRestorer(t, dlqdump.Config{Reader: st, Queue: rest})
	if _, err := rr.Run(t.Context(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	all := append(append(a.items(), b.items()...), rest.items()...)
	onceEach(t, all, 40)
	for _, it := range a.items() {
		if !strings.HasPrefix(it, "0/") {
			t.Fatalf("the first pass delivered %s, not of its batch", it)
		}
	}
	for _, it := range b.items() {
		if !strings.HasPrefix(it, "1/") {
			t.Fatalf("the second pass delivered %s, not of its batch", it)
		}
	}
}

// onceEach fails unless items holds n distinct records, each once.
func onceEach(t *testing.T, items []string, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, it := range items {
		seen[it]++
		if seen[it] > 1 {
			t.Fatalf("%s delivered %d times", it, seen[it])
		}
	}
	if len(seen) != n {
		t.Fatalf("delivered %d distinct records, want %d", len(seen), n)
	}
}

// Carving passes whose selections overlap (batches 0 and 1, and 1 and 2,
// of records interleaved in one segment), run at once: each record is
// delivered once, those of batch 1 by one pass or the other.
func TestCarvingPassesOverlapDeliverOnce(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			st := carveStore(t, 60, 3)
			var wg sync.WaitGroup
			var cols []*carveDest
			for i, expr := range []string{"batch in (0, 1)", "batch in (1, 2)"} {
				sel, err := selection.Parse(expr, nil)
				if err != nil {
					t.Fatal(err)
				}
				c := newCarveDest(nil)
				cols = append(cols, c)
				r := newRestorer(t, dlqdump.Config{Reader: st, Queue: c, Owner: fmt.Sprint("pass-", i)})
				wg.Add(1)
				go func() {
					defer wg.Done()
					if rep, err := r.Run(t.Context(), dlqdump.RunOptions{Select: sel, Rate: 500, Carve: true, WaitClaimed: time.Hour}); err != nil {
						t.Errorf("%s: %+v, %v", expr, rep, err)
					}
				}()
			}
			wg.Wait()
			var all []string
			for _, c := range cols {
				all = append(all, c.items()...)
			}
			onceEach(t, all, 60)
			if n := len(st.Names(sink.AreaReady)); n != 0 {
				t.Fatalf("%d segments left ready, want none", n)
			}
		})
	}
}

// A carving pass whose selection takes none of the records another pass
// carved does not wait for that pass's side segment: it carries a summary,
// which rules it out. The second pass ends, every record of its batch
// delivered, while the first still holds its second record.
func TestCarvingPassSkipsAnothersSide(t *testing.T) {
	st := carveStore(t, 40, 2)
	gate := make(chan struct{})
	defer close(gate)
	a, b := newCarveDest(gate), newCarveDest(nil)
	stopA, cancelA := context.WithCancelCause(context.Background())
	defer cancelA(nil)
	a.stop = stopA
	ra := newRestorer(t, dlqdump.Config{Reader: st, Queue: a, Owner: "job-a"})
	rb := newRestorer(t, dlqdump.Config{Reader: st, Queue: b, Owner: "job-b"})
	doneA := make(chan error, 1)
	go func() {
		_, err := ra.Run(context.Background(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Carve: true, WaitClaimed: time.Hour, Stop: stopA})
		doneA <- err
	}()
	<-a.first
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a failure's bound only
	defer cancel()
	rep, err := rb.Run(ctx, dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "1"}, Carve: true, WaitClaimed: time.Hour})
	if err != nil || rep.Delivered != 20 || rep.Carved != 20 || rep.Claimed != 0 {
		t.Fatalf("the second pass: %+v, %v; want its 20 records delivered while the first is held", rep, err)
	}
	if n := len(a.items()); n != 1 {
		t.Fatalf("the first pass delivered %d records meanwhile; its destination holds all but one", n)
	}
	cancelA(errors.New("paused"))
	<-doneA
}

// readsByName is a store that counts the bytes read from each segment.
type readsByName struct {
	*memsink.Store
	mu    sync.Mutex
	n     map[string]int // bytes read
	opens map[string]int // opens tried, found or not
}

func (s *readsByName) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	s.mu.Lock()
	if s.opens == nil {
		s.opens = map[string]int{}
	}
	s.opens[name]++
	s.mu.Unlock()
	f, err := s.Store.Open(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return &sideCountedFile{File: f, s: s, name: name}, nil
}

type sideCountedFile struct {
	sink.File
	s    *readsByName
	name string
}

func (f *sideCountedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.s.mu.Lock()
	f.s.n[f.name] += n
	f.s.mu.Unlock()
	return n, err
}

// A carving pass delivers its side segment from the bytes it wrote, not
// from the store: the side segment is never read.
func TestCarvedSideReadFromMemory(t *testing.T) {
	st := &readsByName{Store: carveStore(t, 40, 2), n: map[string]int{}}
	parent := st.Names(sink.AreaReady)[0]
	c := newCarveDest(nil)
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: c})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Carve: true})
	if err != nil || rep.Delivered != 20 || rep.Carved != 20 || rep.SideSegments != 1 {
		t.Fatalf("%+v, %v", rep, err)
	}
	for name, n := range st.n {
		if name != parent {
			t.Fatalf("read %d bytes of %s, the side segment; want none (only %s read)", n, name, parent)
		}
	}
}

// A carving pass over a segment whose every record it selects (here a side
// segment a carving pass left when it was stopped) copies nothing: it
// delivers them from the segment.
func TestCarvingPassDeliversAWhollySelectedSegment(t *testing.T) {
	st := carveStore(t, 40, 2)
	stop, cancel := context.WithCancelCause(context.Background())
	paused := errors.New("paused")
	first := newCarveDest(nil)
	go func() { <-first.first; cancel(paused) }()
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: first})
	opts := dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Rate: 1000, Carve: true, Stop: stop}
	rep, err := r.Run(t.Context(), opts)
	if !errors.Is(err, paused) || rep.Carved != 20 || rep.Delivered == 20 {
		t.Fatalf("the first pass: %+v, %v; want 20 carved, stopped before all were delivered", rep, err)
	}
	if n := len(st.Names(sink.AreaReady)); n != 2 {
		t.Fatalf("%d segments ready after the carve, want the segment and its side segment", n)
	}
	rest := newCarveDest(nil)
	r2 := newRestorer(t, dlqdump.Config{Reader: st, Queue: rest})
	opts.Stop = nil
	rep, err = r2.Run(t.Context(), opts)
	if err != nil || rep.Carved != 0 || rep.SideSegments != 0 || rep.Delivered != uint64(20-len(first.items())) {
		t.Fatalf("the pass after: %+v, %v; want the side segment's %d records delivered from it, nothing carved", rep, err, 20-len(first.items()))
	}
	onceEach(t, append(first.items(), rest.items()...), 20)
}

// A dry run over a segment whose progress lists records a carving pass
// carved (it failed before their side segment was written) restores no
// side segment: it writes none. Before, it tried the side segment it named
// and found it missing.
func TestDryRunOverACarvedProgress(t *testing.T) {
	st := carveStore(t, 40, 2)
	name := st.Names(sink.AreaReady)[0]
	pt, err := faults.ParsePoint("Reader.Create#1/fail") // the side segment's staging
	if err != nil {
		t.Fatal(err)
	}
	r := newRestorer(t, dlqdump.Config{Reader: faults.WrapReader(st, faults.New(pt)), Queue: newCarveDest(nil)})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Carve: true})
	if err == nil || rep.Carved != 20 || rep.Delivered != 0 {
		t.Fatalf("the carving pass: %+v, %v; want it failed writing the side segment", rep, err)
	}
	if names := st.Names(sink.AreaReady); len(names) != 1 || names[0] != name {
		t.Fatalf("ready after the failure: %v, want %s alone", names, name)
	}
	counted := &readsByName{Store: st, n: map[string]int{}}
	dry := newRestorer(t, dlqdump.Config{Reader: counted, Queue: newCarveDest(nil)})
	rep, err = dry.Run(t.Context(), dlqdump.RunOptions{DryRun: true})
	if err != nil || rep.Gone != 0 || rep.Segments != 1 {
		t.Fatalf("the dry run: %+v, %v; want the segment alone counted", rep, err)
	}
	for n := range counted.opens {
		if n != name {
			t.Fatalf("the dry run opened %s (opens: %v); want %s alone", n, counted.opens, name)
		}
	}
	all := newCarveDest(nil)
	if _, err := newRestorer(t, dlqdump.Config{Reader: st, Queue: all}).Run(t.Context(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := newRestorer(t, dlqdump.Config{Reader: st, Queue: all}).Run(t.Context(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	onceEach(t, all.items(), 40)
}

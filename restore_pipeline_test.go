package dlqdump_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// distantStore is a memsink whose record writes and segment opens take a
// while, as a distant store's round trips do, so that a Restorer with
// segments in flight overlaps them.
type distantStore struct {
	*memsink.Store
	rtt time.Duration
}

func (s distantStore) wait(ctx context.Context) error {
	t := time.NewTimer(s.rtt)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s distantStore) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Store.WriteRecord(ctx, name, data, ifVersion)
}

func (s distantStore) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.Open(ctx, area, name)
}

// seedSegments puts n sealed segments into st, segment i holding blocks[i%len]
// blocks of per records each, and returns their names, oldest first, and
// their records' items ("NAME/SEQ").
func seedSegments(t *testing.T, st *memsink.Store, n, per int, blocks []int) ([]string, []string) {
	t.Helper()
	return seedPadded(t, st, n, per, blocks, 0)
}

// seedPadded is seedSegments with records of pad bytes more ("NAME/SEQ "
// and pad x's), in blocks as large as they make them.
func seedPadded(t *testing.T, st *memsink.Store, n, per int, blocks []int, pad int) ([]string, []string) {
	t.Helper()
	base := time.Now().Add(-time.Hour)
	padding := ""
	if pad > 0 {
		padding = " " + strings.Repeat("x", pad)
	}
	var names, items []string
	for i := range n {
		created := base.Add(time.Duration(i) * time.Millisecond)
		id := segment.NewID(created)
		name := segment.FileName(created, id)
		var buf bytes.Buffer
		w, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, &segment.WriterOptions{BlockSize: segment.MaxBlockSize})
		if err != nil {
			t.Fatal(err)
		}
		for b := range blocks[i%len(blocks)] {
			for r := range per {
				seq := uint64(b*per + r)
				item := fmt.Sprintf("%s/%d%s", name, seq, padding)
				if err := w.Add(created, nil, []byte(item)); err != nil {
					t.Fatal(err)
				}
				items = append(items, item)
			}
			if err := w.Flush(); err != nil { // ends the block
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		st.Put(sink.AreaReady, name, buf.Bytes())
		names = append(names, name)
	}
	return names, items
}

// heldCheckpoints is a distantStore whose checkpoints of one segment past
// its start wait until release is closed (or give up after a minute,
// setting gaveUp), so that a test can see what the Restorer does meanwhile.
type heldCheckpoints struct {
	distantStore
	name    string
	release chan struct{}
	gaveUp  atomic.Bool
}

func (s *heldCheckpoints) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	if name == s.name {
		if rec, ok := claims.Parse(data); ok && rec.Held() {
			if p, err := claims.ParseProgress(rec.Progress); err == nil && p.Seq > 0 {
				select {
				case <-s.release:
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(time.Minute): // only when the test fails
					s.gaveUp.Store(true)
				}
			}
		}
	}
	return s.distantStore.WriteRecord(ctx, name, data, ifVersion)
}

// With segments in flight, the deliveries of different segments overlap:
// while the first segment's checkpoint is on its way (held here until
// another segment delivers), the others deliver. Each segment keeps its own
// order, at every delivery the records a crash would deliver again (beyond
// their segment's saved progress) are at most one block of each segment,
// and at most SegmentsInFlight blocks in all, and the destination never has
// two Enqueue calls at once (Concurrency 1).
func TestSegmentsInFlightOverlapDeliveries(t *testing.T) {
	const per, inFlight = 7, 8
	mem := memsink.New()
	names, items := seedSegments(t, mem, 24, per, []int{1, 3, 1, 1, 2})
	st := &heldCheckpoints{distantStore: distantStore{Store: mem, rtt: 2 * time.Millisecond}, name: names[0], release: make(chan struct{})}
	ctx := context.Background()

	var (
		mu         sync.Mutex
		got        = map[string][]string{} // by segment, in delivery order
		bySeg      = map[string]uint64{}   // records delivered per segment
		worstSeg   int                     // most records of one segment a crash would deliver again
		worst      int                     // most records in all
		maxAtRisk  int                     // most segments with records at risk at once
		maxClaims  int                     // most live claims seen at once
		fail       []string
		inside     atomic.Int32
		concurrent atomic.Bool
		released   sync.Once
	)
	// atRisk returns what a crash now would deliver again, the most of it
	// in one segment, the segments it is in, and the live claims, from the
	// records as stored.
	atRisk := func() (risk, most, segs, live int) {
		for _, seg := range names {
			if data, _, err := mem.ReadRecord(ctx, seg); err == nil {
				if rec, ok := claims.Parse(data); ok && rec.Held() {
					live++
				}
			}
		}
		add := func(n int) {
			if n > 0 {
				risk += n
				most = max(most, n)
				segs++
			}
		}
		for seg, n := range bySeg {
			data, _, err := mem.ReadRecord(ctx, seg)
			if errors.Is(err, sink.ErrNotFound) {
				if mem.Get(sink.AreaReady, seg) == nil {
					continue // finished
				}
				add(int(n))
				continue
			}
			if err != nil {
				fail = append(fail, err.Error())
				continue
			}
			rec, ok := claims.Parse(data)
			if !ok {
				fail = append(fail, "damaged record of "+seg)
				continue
			}
			p, err := claims.ParseProgress(rec.Progress)
			if err != nil {
				fail = append(fail, err.Error())
				continue
			}
			if !p.Done && n > p.Seq {
				add(int(n - p.Seq))
			}
		}
		return risk, most, segs, live
	}
	dst := queueFunc(func(x any) error {
		if inside.Add(1) > 1 {
			concurrent.Store(true)
		}
		defer inside.Add(-1)
		mu.Lock()
		defer mu.Unlock()
		item := x.(string)
		seg, _, _ := strings.Cut(item, "/")
		got[seg] = append(got[seg], item)
		bySeg[seg]++
		risk, most, segs, live := atRisk()
		worst, worstSeg, maxAtRisk = max(worst, risk), max(worstSeg, most), max(maxAtRisk, segs)
		maxClaims = max(maxClaims, live)
		if seg != names[0] {
			released.Do(func() { close(st.release) })
		}
		return nil
	})
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{AsString: true}, Queue: dst, SegmentsInFlight: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Run(ctx, dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if st.gaveUp.Load() {
		t.Fatalf("no other segment delivered while the first segment's checkpoint was on its way: deliveries wait for the segment before")
	}
	if len(fail) > 0 {
		t.Fatalf("reading the records: %v", fail)
	}
	if rep.Segments != len(names) || rep.Delivered != uint64(len(items)) {
		t.Fatalf("report %+v, want %d segments and %d records", rep, len(names), len(items))
	}
	k := 0
	for _, seg := range names {
		for i, item := range got[seg] {
			if want := fmt.Sprintf("%s/%d", seg, i); item != want {
				t.Fatalf("delivery %d of segment %s is %s, want %s: not the segment's order", i, seg, item, want)
			}
		}
		k += len(got[seg])
	}
	if k != len(items) {
		t.Fatalf("delivered %d records, want %d", k, len(items))
	}
	if concurrent.Load() {
		t.Fatalf("two Enqueue calls at once with Concurrency 1")
	}
	if worstSeg > per {
		t.Fatalf("at one delivery a crash would have delivered %d records of one segment again, more than one block (%d)", worstSeg, per)
	}
	if worst > inFlight*per {
		t.Fatalf("at one delivery a crash would have delivered %d records again, more than one block (%d) per segment in flight (%d)", worst, per, inFlight)
	}
	if maxAtRisk < 2 || maxClaims < 2 {
		t.Fatalf("at most %d segments had records at risk at once, %d claimed at once: deliveries did not overlap", maxAtRisk, maxClaims)
	}
	if left := mem.Names(sink.AreaReady); len(left) > 0 {
		t.Fatalf("left ready: %v", left)
	}
	t.Logf("at most %d records at risk of a crash (%d of one segment, %d segments at once), %d segments claimed at once", worst, worstSeg, maxAtRisk, maxClaims)
}

// A pass stopped while segments are claimed ahead (Close) releases every
// claim: the segments are claimable at once, and resume where they were.
func TestSegmentsInFlightReleasedOnClose(t *testing.T) {
	mem := memsink.New()
	names, items := seedSegments(t, mem, 12, 5, []int{2})
	st := distantStore{Store: mem, rtt: time.Millisecond}
	ctx := context.Background()
	var (
		mu        sync.Mutex
		delivered = map[string]int{}
		r         *dlqdump.Restorer
		closing   sync.Once
		closed    = make(chan error, 1)
	)
	dst := queueFunc(func(x any) error {
		mu.Lock()
		delivered[x.(string)]++
		n := len(delivered)
		mu.Unlock()
		if n == 12 { // in the second segment: the next ones are claimed ahead
			closing.Do(func() { go func() { closed <- r.Close() }() })
		}
		return nil
	})
	var err error
	r, err = dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{AsString: true}, Queue: dst, SegmentsInFlight: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, dlqdump.RunOptions{}); err != nil && !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		data, _, err := mem.ReadRecord(ctx, name)
		if errors.Is(err, sink.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec, ok := claims.Parse(data); !ok || rec.Held() {
			t.Fatalf("after Close, the record of %s is held: %s", name, data)
		}
	}
	// Another restorer finishes at once, and nothing is delivered twice.
	r2, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{AsString: true}, Queue: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := r2.Run(ctx, dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, it := range items {
		if delivered[it] != 1 {
			t.Fatalf("%s delivered %d times", it, delivered[it])
		}
	}
}

// slowFinish is a memsink whose deletions of ready segments, but that of
// last, wait until a record of last was delivered (or give up after a
// minute, setting gaveUp).
type slowFinish struct {
	*memsink.Store
	last      string
	delivered chan struct{}
	gaveUp    atomic.Bool
}

func (s *slowFinish) Delete(ctx context.Context, area sink.Area, name string) error {
	if area == sink.AreaReady && name != s.last {
		select {
		case <-s.delivered:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute): // only when the test fails
			s.gaveUp.Store(true)
		}
	}
	return s.Store.Delete(ctx, area, name)
}

// A segment whose deliveries are durable leaves its place among the
// segments in flight to the next while it is being finished (deleted with
// its record), which puts no record at risk: with SegmentsInFlight 2, the
// third segment delivers while the first two are still being deleted.
func TestSegmentsInFlightFinishingLeavesItsPlace(t *testing.T) {
	mem := memsink.New()
	names, items := seedSegments(t, mem, 3, 5, []int{2})
	st := &slowFinish{Store: mem, last: names[2], delivered: make(chan struct{})}
	var once sync.Once
	var got atomic.Int64
	dst := queueFunc(func(x any) error {
		got.Add(1)
		if strings.HasPrefix(x.(string), names[2]+"/") {
			once.Do(func() { close(st.delivered) })
		}
		return nil
	})
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: dst, SegmentsInFlight: 2})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.gaveUp.Load() {
		t.Fatal("the third segment did not deliver while the first two were being deleted: a segment being finished keeps its place among the segments in flight")
	}
	if rep.Segments != 3 || got.Load() != int64(len(items)) {
		t.Fatalf("report %+v, %d delivered, want 3 segments and %d records", rep, got.Load(), len(items))
	}
}

// readCounter is a memsink counting the record reads of each segment.
type readCounter struct {
	*memsink.Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *readCounter) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	s.mu.Lock()
	s.reads[name]++
	s.mu.Unlock()
	return s.Store.ReadRecord(ctx, name)
}

// A segment another restorer held when the pass listed the store is left to
// it without a request: the listing's look at its record (which keeps
// observing it, so that it is taken over once its holder stops) says so,
// and the pass counts it as claimed instead of reading its record again to
// try it.
func TestPassLeavesSegmentsClaimedAtTheListing(t *testing.T) {
	mem := memsink.New()
	names, _ := seedSegments(t, mem, 3, 5, []int{1})
	st := &readCounter{Store: mem, reads: map[string]int{}}
	other, err := claims.NewClaimer(mem, "other", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Claim(t.Context(), names[1]); err != nil {
		t.Fatal(err)
	}
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: queueFunc(func(any) error { return nil })})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Segments != 2 || rep.Claimed != 1 {
		t.Fatalf("report %+v, want 2 segments restored and 1 claimed", rep)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// The looks of the refreshes before and after the pass.
	if n := st.reads[names[1]]; n != 2 {
		t.Fatalf("the record of the segment held by another restorer was read %d times, want 2 (the listings' looks)", n)
	}
}

// readsAtOnce is a memsink whose reads of the records in slow wait until
// two of them are under way at once (or give up after a minute, setting
// gaveUp).
type readsAtOnce struct {
	*memsink.Store
	slow   map[string]bool
	mu     sync.Mutex
	inside int
	both   chan struct{}
	gaveUp atomic.Bool
}

func (s *readsAtOnce) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	if s.slow[name] {
		s.mu.Lock()
		s.inside++
		if s.inside == 2 {
			close(s.both)
		}
		s.mu.Unlock()
		select {
		case <-s.both:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(time.Minute): // only when the test fails
			s.gaveUp.Store(true)
		}
	}
	return s.Store.ReadRecord(ctx, name)
}

// A pass looks at the records of the other restorers' claims (the Claimed
// gauge) and of the segments they are finishing (the sweep) several at
// once: on S3 each is a round trip, and a fleet holds many.
func TestRefreshReadsRecordsAtOnce(t *testing.T) {
	for _, what := range []string{"claimed", "finishing"} {
		t.Run(what, func(t *testing.T) {
			mem := memsink.New()
			names, _ := seedSegments(t, mem, 4, 5, []int{1})
			other, err := claims.NewClaimer(mem, "other", time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			st := &readsAtOnce{Store: mem, slow: map[string]bool{}, both: make(chan struct{})}
			for _, name := range names[:2] {
				if _, err := other.Claim(t.Context(), name); err != nil {
					t.Fatal(err)
				}
				if what == "finishing" {
					// Deleted, its record not yet removed.
					if err := mem.Delete(t.Context(), sink.AreaReady, name); err != nil {
						t.Fatal(err)
					}
				}
				st.slow[name] = true
			}
			r := newRestorer(t, dlqdump.Config{Reader: st, Queue: queueFunc(func(any) error { return nil })})
			if _, err := r.Run(t.Context(), dlqdump.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			if st.gaveUp.Load() {
				t.Fatal("the records held by another restorer were read one after the other")
			}
		})
	}
}

// The segments in flight share the read-ahead one segment had: a segment
// whose blocks do not fit its share (here 1 MiB blocks, against 4 MiB / 8)
// is read as one segment at a time was, holding the delivery token from its
// first block to its last, so that the Restorer reads one such block at a
// time (docs/MEMORY.md): no two segments then have records at risk at once.
func TestSegmentsInFlightLargeBlocksReadAlone(t *testing.T) {
	const per = 8
	mem := memsink.New()
	names, items := seedPadded(t, mem, 4, per, []int{3}, 128<<10) // blocks of 1 MiB
	st := distantStore{Store: mem, rtt: time.Millisecond}
	ctx := context.Background()
	var (
		mu    sync.Mutex
		bySeg = map[string]uint64{}
		most  int
		fail  []string
	)
	dst := queueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		seg, _, _ := strings.Cut(x.(string), "/")
		bySeg[seg]++
		atRisk := 0
		for s, n := range bySeg {
			data, _, err := mem.ReadRecord(ctx, s)
			if err != nil {
				continue // finished, or not claimed yet
			}
			rec, ok := claims.Parse(data)
			if !ok {
				fail = append(fail, "damaged record of "+s)
				continue
			}
			if p, err := claims.ParseProgress(rec.Progress); err == nil && !p.Done && n > p.Seq {
				atRisk++
			}
		}
		most = max(most, atRisk)
		return nil
	})
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: dst})
	rep, err := r.Run(ctx, dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fail) > 0 {
		t.Fatal(fail)
	}
	if rep.Segments != len(names) || rep.Delivered != uint64(len(items)) {
		t.Fatalf("report %+v, want %d segments and %d records", rep, len(names), len(items))
	}
	if most > 1 {
		t.Fatalf("%d segments of 1 MiB blocks had records at risk at once: they were read side by side", most)
	}
}

// A pass over named segments (RunOptions.Segments: what dlqdump restore
// runs again over the segments whose holders it watched go quiet) makes no
// listing of its own, so it does not pass over a segment because the last
// listing saw it held: it tries it, and takes it over once its holder has
// left it unchanged for its lease. Before, the previous pass's listing
// said "held" forever, and the killed CLI's segments stayed ready
// (TestFaultPoints/restore/KILL-at-delivery-4: "segments still ready after
// the run again").
func TestNamedPassTakesOverWhatTheLastListingSawHeld(t *testing.T) {
	mem := memsink.New()
	names, _ := seedSegments(t, mem, 2, 5, []int{1})
	dead, err := claims.NewClaimer(mem, "dead", claims.MinLease, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Claim(t.Context(), names[1]); err != nil {
		t.Fatal(err) // never renewed: its holder is gone
	}
	r := newRestorer(t, dlqdump.Config{Reader: mem, Queue: queueFunc(func(any) error { return nil }), Lease: claims.MinLease})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Segments != 1 || rep.Claimed != 1 {
		t.Fatalf("first pass: report %+v, want 1 segment restored and 1 claimed", rep)
	}
	// Each try observes the record; it is taken over a lease after the
	// first look. A pass that never tries it would loop here: give up
	// after many leases.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for tries := 0; ; tries++ {
		rep, err := r.Run(t.Context(), dlqdump.RunOptions{Segments: names[1:]})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Segments == 1 {
			break
		}
		if tries == 1000 {
			t.Fatalf("the segment of a dead holder was never taken over by passes over its name: %+v", rep)
		}
		<-tick.C
	}
}

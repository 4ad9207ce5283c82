package dlqdump_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// dest collects what a Restorer delivers. It can refuse a share of calls and
// report a Rate.
type dest struct {
	mu      sync.Mutex
	items   []string
	refuse  float64 // probability of refusing a call
	rng     *rand.Rand
	calls   int
	refused int
	rate    atomic.Value // float32
}

func (s *dest) Enqueue(x any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.refuse > 0 && s.rng.Float64() < s.refuse {
		s.refused++
		return errors.New("queue full")
	}
	switch v := x.(type) {
	case []byte:
		s.items = append(s.items, string(v))
	case string:
		s.items = append(s.items, v)
	case *string:
		s.items = append(s.items, *v)
	case *dlqdump.Envelope:
		s.items = append(s.items, fmt.Sprint(v.Item))
	default:
		s.items = append(s.items, fmt.Sprint(v))
	}
	return nil
}

func (s *dest) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.items)
}

// dumpItems dumps items into dir with a Queue and returns them.
func dumpItems(t testing.TB, dir string, c dlqdump.Config, items []string) {
	t.Helper()
	c.Writer = &fs.Writer{Directory: dir}
	q := newQueue(t, c)
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

func itemsN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%06d-%s", prefix, i, strings.Repeat("p", i%40))
	}
	return out
}

func newRestorer(t testing.TB, c dlqdump.Config) *dlqdump.Restorer {
	t.Helper()
	if c.Decoder == nil {
		c.Decoder = decoder.Fallthrough{AsString: true}
	}
	r, err := dlqdump.NewRestorer(&c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// Dump through a real koykov queue's DLQ, restore into another real koykov
// queue: the multiset of items is the same; none lost, none twice.
func TestRestoreKoykovRoundTrip(t *testing.T) {
	dir := t.TempDir()
	dump := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 64 * dlqdump.Kilobyte})
	w1 := &slowWorker{delay: 100 * time.Microsecond, seen: map[string]int{}}
	src, err := queue.New(&queue.Config{Capacity: 8, Workers: 1, Worker: w1, DLQ: dump})
	if err != nil {
		t.Fatal(err)
	}
	all := itemsN("rt", 8000)
	for _, it := range all {
		if err := src.Enqueue([]byte(it)); err != nil {
			t.Fatal(err)
		}
	}
	_ = src.Close()
	for src.Size() > 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if err := dump.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := &slowWorker{seen: map[string]int{}}
	dst, err := queue.New(&queue.Config{Capacity: 64, Workers: 2, Worker: w2})
	if err != nil {
		t.Fatal(err)
	}
	r := newRestorer(t, dlqdump.Config{
		Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dst,
		AllowRate: 0.9, PostponeInterval: time.Millisecond,
	})
	if err := r.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = dst.Close()
	for dst.Size() > 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	w1.mu.Lock()
	w2.mu.Lock()
	defer w1.mu.Unlock()
	defer w2.mu.Unlock()
	var restored int
	for _, it := range all {
		if n := w1.seen[it] + w2.seen[it]; n != 1 {
			t.Fatalf("item %s processed %d times (source %d, restored %d)", it[:9], n, w1.seen[it], w2.seen[it])
		}
		restored += w2.seen[it]
	}
	if restored == 0 {
		t.Fatal("nothing was dumped and restored")
	}
	if n := len(segmentsIn(t, dir)); n != 0 {
		t.Fatalf("%d segments left after a complete restore", n)
	}
	s := r.Stats()
	if s.Restored != uint64(restored) || s.Ready != 0 || s.Refreshed.IsZero() {
		t.Fatalf("stats %+v, restored %d", s, restored)
	}
	t.Logf("%d items: %d processed at the source, %d dumped and restored", len(all), len(all)-restored, restored)
}

// A destination refusing 30% of calls at random: everything arrives, in order
// within each segment.
func TestRestoreRefusingDestination(t *testing.T) {
	dir := t.TempDir()
	all := itemsN("refuse", 3000)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Kilobyte}, all)
	records := readDir(t, dir)
	dst := &dest{refuse: 0.3, rng: rand.New(rand.NewPCG(3, 4))}
	r := newRestorer(t, dlqdump.Config{
		Reader: &fs.Reader{Directory: dir}, Queue: dst,
		RetryBase: 10 * time.Microsecond, RetryMax: 100 * time.Microsecond, MaxAttempts: 1000,
	})
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSegmentOrder(t, records, dst.got())
	if dst.refused == 0 || rep.Retried != uint64(dst.refused) || rep.Delivered != uint64(len(all)) {
		t.Fatalf("refused %d, report %+v", dst.refused, rep)
	}
	t.Logf("%d refusals retried, %d segments", dst.refused, rep.Segments)
}

// A record refused MaxAttempts times is quarantined with the error, not lost.
func TestRestoreQuarantinesRefused(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{}, []string{"a", "b", "c"})
	dst := &dest{refuse: 1, rng: rand.New(rand.NewPCG(1, 1))}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, RetryBase: time.Microsecond, RetryMax: time.Microsecond, MaxAttempts: 3})
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Quarantined != 3 || rep.Delivered != 0 || dst.calls != 9 {
		t.Fatalf("report %+v, %d calls", rep, dst.calls)
	}
	q := readArea(t, dir+"/quarantine")
	if len(q) != 3 || q[0].Payload != "a" || !strings.Contains(q[0].Headers[dlqdump.HeaderQuarantine], "refused by the destination 3 times: queue full") {
		t.Fatalf("quarantine holds %+v", q)
	}
	if len(segmentsIn(t, dir)) != 0 {
		t.Fatal("the segment was not completed")
	}
}

func readArea(t testing.TB, dir string) []dumped { return readDir(t, dir) }

// A segment of another Version is quarantined with the reason and restored
// after release by a restorer that accepts it; undecodable records end in a
// quarantine segment with the reason and can be released back too.
func TestRestoreVersionAndDecodeQuarantine(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := dlqdump.NewVersion(1, 0, 0, 0), dlqdump.NewVersion(2, 0, 0, 0)
	dumpItems(t, dir, dlqdump.Config{Version: v1}, []string{`"old-1"`, `"old-2"`})
	dumpItems(t, dir, dlqdump.Config{Version: v2}, []string{`"new-1"`, `not json`, `"new-2"`})
	dst := &dest{}
	rd := &fs.Reader{Directory: dir}
	r := newRestorer(t, dlqdump.Config{Version: v2, Reader: rd, Queue: dst, Decoder: decoder.JSONOf[string]()})
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := dst.got(); !slices.Equal(got, []string{"new-1", "new-2"}) {
		t.Fatalf("delivered %q", got)
	}
	if rep.QuarantinedSegments != 1 || rep.Quarantined != 3 {
		t.Fatalf("report %+v", rep)
	}
	var quarantined []sink.Info
	for si, err := range rd.List(context.Background(), sink.AreaQuarantine) {
		if err != nil {
			t.Fatal(err)
		}
		quarantined = append(quarantined, si)
	}
	if len(quarantined) != 2 {
		t.Fatalf("%d quarantined segments, want 2 (the old version, the undecodable record)", len(quarantined))
	}
	var sawVersion, sawDecode bool
	for _, si := range quarantined {
		if strings.Contains(si.Reason, "version 1.0.0.0, restorer expects 2.0.0.0") {
			sawVersion = true
		}
		for _, rec := range readSegment(t, dir+"/quarantine/"+si.Name) {
			if rec.Payload == "not json" && strings.HasPrefix(rec.Headers[dlqdump.HeaderQuarantine], "decode: ") &&
				strings.Contains(rec.Headers[dlqdump.HeaderOrigin], ".dlq#1") {
				sawDecode = true
			}
		}
	}
	if !sawVersion || !sawDecode {
		t.Fatalf("reasons missing: version %v decode %v in %+v", sawVersion, sawDecode, quarantined)
	}
	// Release everything back and restore with a restorer that accepts both
	// versions and decodes anything.
	for _, si := range quarantined {
		if err := rd.Move(context.Background(), si.Name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
			t.Fatal(err)
		}
	}
	dst2 := &dest{}
	r2 := newRestorer(t, dlqdump.Config{Version: v2, Reader: rd, Queue: dst2,
		VersionCompatible: func(seg, want dlqdump.Version) bool { return seg.Major() <= want.Major() }})
	if _, err := r2.Run(context.Background(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	got := dst2.got()
	slices.Sort(got)
	if !slices.Equal(got, []string{`"old-1"`, `"old-2"`, `not json`}) {
		t.Fatalf("released items restored as %q", got)
	}
}

// The loop guard: items restored into a queue whose DLQ is the dump again
// carry a replay count; past MaxReplays they are quarantined, not cycled.
func TestRestoreLoopGuard(t *testing.T) {
	dir := t.TempDir()
	dump := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, FlushInterval: 10 * time.Millisecond})
	defer dump.Close()
	for i := range 5 {
		if err := dump.Enqueue(fmt.Sprintf("poison-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The destination fails everything straight back into the dump.
	back := queueFunc(func(x any) error { return dump.Enqueue(x) })
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: back, DeliverEnvelope: true, MaxReplays: 3})
	for range 50 {
		if err := dump.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(segmentsIn(t, dir)) == 0 {
			break
		}
		if _, err := r.Run(context.Background(), dlqdump.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(segmentsIn(t, dir)); n != 0 {
		t.Fatalf("%d segments still cycling", n)
	}
	q := readDir(t, dir+"/quarantine")
	if len(q) != 5 {
		t.Fatalf("%d records quarantined, want 5", len(q))
	}
	for _, rec := range q {
		if rec.Headers[dlqdump.HeaderReplays] != "3" || !strings.Contains(rec.Headers[dlqdump.HeaderQuarantine], "replayed 3 times") {
			t.Fatalf("quarantined record %+v", rec)
		}
	}
	if s := r.Stats(); s.Restored != 15 {
		t.Fatalf("restored %d times, want 5 items x 3 replays", s.Restored)
	}
}

type queueFunc func(any) error

func (f queueFunc) Enqueue(x any) error { return f(x) }

// The rate limit holds within a few percent over a few seconds.
func TestRestoreRateLimit(t *testing.T) {
	dir := t.TempDir()
	const rate = 2000.0
	dumpItems(t, dir, dlqdump.Config{}, itemsN("rate", 6000))
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, RateLimit: rate})
	start := time.Now()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := float64(rep.Delivered-1) / time.Since(start).Seconds()
	t.Logf("delivered %d at %.1f items/s with RateLimit %.0f (%+.1f%%)", rep.Delivered, got, rate, 100*(got-rate)/rate)
	// The limit must never be exceeded; falling short only means a loaded
	// machine, so that bound is generous. The figure above is what to read.
	if got > rate*1.05 || got < rate*0.5 {
		t.Fatalf("rate %.1f/s, limit %.0f/s", got, rate)
	}
}

// AllowRate: delivery waits while the destination is fuller than AllowRate.
func TestRestoreAllowRate(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{}, itemsN("allow", 100))
	dst := &ratedSink{}
	dst.rate.Store(uint32(99))
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, AllowRate: 0.5, PostponeInterval: 5 * time.Millisecond})
	done := make(chan error)
	go func() { done <- r.Restore(context.Background()) }()
	time.Sleep(100 * time.Millisecond)
	if n := dst.n.Load(); n != 0 {
		t.Fatalf("%d items delivered while the destination reported Rate 0.99", n)
	}
	dst.rate.Store(10)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := dst.n.Load(); n != 100 {
		t.Fatalf("%d delivered", n)
	}
}

type ratedSink struct {
	n    atomic.Int64
	rate atomic.Uint32 // percent
}

func (s *ratedSink) Enqueue(any) error { s.n.Add(1); return nil }
func (s *ratedSink) Rate() float32     { return float32(s.rate.Load()) / 100 }

// Filters restore the chosen records; the rest stays in the dump, restorable
// later. A dry run counts by reason and changes nothing. Limit stops a pass
// and the next resumes.
func TestRestoreSelective(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}})
	for i := range 300 {
		reason := []string{"leak", "failed", "deadline"}[i%3]
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("it-%03d", i), Headers: dlqdump.Headers{dlqdump.HeaderReason: reason}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	before := segmentsIn(t, dir)
	rd := &fs.Reader{Directory: dir}

	// Dry run.
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst})
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != 300 || rep.ByReason["leak"] != 100 || rep.ByReason["failed"] != 100 || rep.ByReason["deadline"] != 100 || len(dst.got()) != 0 {
		t.Fatalf("dry run %+v, delivered %d", rep, len(dst.got()))
	}
	if !slices.Equal(segmentsIn(t, dir), before) {
		t.Fatal("the dry run changed the dump")
	}

	// Only "failed" records.
	rep, err = r.Run(context.Background(), dlqdump.RunOptions{Where: dlqdump.Headers{dlqdump.HeaderReason: "failed"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != 100 || rep.Skipped != 200 || len(dst.got()) != 100 {
		t.Fatalf("filtered run %+v", rep)
	}
	for _, it := range dst.got() {
		var i int
		fmt.Sscanf(it, "it-%d", &i)
		if i%3 != 1 {
			t.Fatalf("delivered %s, not a failed one", it)
		}
	}
	// The other 200 stay in their segments, which stay ready: a dry run
	// would deliver them, and only them.
	if dry, err := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true}); err != nil || dry.Delivered != 200 || dry.ByReason["failed"] != 0 {
		t.Fatalf("%+v %v: want the 200 records left", dry, err)
	}
	if !slices.Equal(segmentsIn(t, dir), before) {
		t.Fatal("a selective pass rewrote its segments")
	}

	// Limit: 50 now, then the rest.
	rep, err = r.Run(context.Background(), dlqdump.RunOptions{Limit: 50})
	if err != nil || rep.Delivered != 50 {
		t.Fatalf("limited run %+v %v", rep, err)
	}
	rep, err = r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil || rep.Delivered != 150 {
		t.Fatalf("rest %+v %v", rep, err)
	}
	got := dst.got()
	slices.Sort(got)
	if len(got) != 300 || len(slices.Compact(got)) != 300 {
		t.Fatalf("%d items delivered overall, want 300 distinct", len(got))
	}
	if n := len(segmentsIn(t, dir)); n != 0 {
		t.Fatalf("%d segments left", n)
	}
}

// A time range filter restores only the records of that range.
func TestRestoreTimeRange(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{}, []string{"early-1", "early-2"})
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	dumpItems(t, dir, dlqdump.Config{}, []string{"late-1"})
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst})
	if _, err := r.Run(context.Background(), dlqdump.RunOptions{Since: mid}); err != nil {
		t.Fatal(err)
	}
	if got := dst.got(); !slices.Equal(got, []string{"late-1"}) {
		t.Fatalf("got %q", got)
	}
	if _, err := r.Run(context.Background(), dlqdump.RunOptions{Until: mid}); err != nil {
		t.Fatal(err)
	}
	if got := dst.got(); !slices.Equal(got, []string{"late-1", "early-1", "early-2"}) {
		t.Fatalf("got %q", got)
	}
}

// Background mode polls every CheckInterval until Close, which is safe twice.
func TestRestoreBackground(t *testing.T) {
	dir := t.TempDir()
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, CheckInterval: 20 * time.Millisecond})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	dumpItems(t, dir, dlqdump.Config{}, itemsN("bg", 10))
	deadline := time.Now().Add(10 * time.Second)
	for len(dst.got()) < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(dst.got()); n != 10 {
		t.Fatalf("background restored %d of 10", n)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if err := r.Restore(context.Background()); !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatalf("Restore after Close = %v", err)
	}
}

func TestDailyWindow(t *testing.T) {
	moscow := time.FixedZone("MSK", 3*3600)
	w, err := dlqdump.DailyWindow("01:00", "05:00", moscow)
	if err != nil {
		t.Fatal(err)
	}
	if w.Start != time.Hour || w.End != 5*time.Hour || w.Location != moscow {
		t.Fatalf("%+v", w)
	}
	if _, err := dlqdump.DailyWindow("25:00", "05:00", nil); !errors.Is(err, dlqdump.ErrConfig) {
		t.Fatal(err)
	}
	// Outside the window the background restorer waits: nothing is delivered.
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{}, []string{"x"})
	now := time.Now().In(moscow)
	h := time.Duration(now.Hour()) * time.Hour
	closed := dlqdump.Window{Start: (h + 2*time.Hour) % (24 * time.Hour), End: (h + 3*time.Hour) % (24 * time.Hour), Location: moscow}
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, CheckInterval: 10 * time.Millisecond, Windows: []dlqdump.Window{closed}})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(dst.got()); n != 0 {
		t.Fatalf("%d delivered outside the window", n)
	}
	_ = r.Close()
	open := dlqdump.Window{Start: h, End: (h + time.Hour) % (24 * time.Hour), Location: moscow}
	r2 := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, CheckInterval: 10 * time.Millisecond, Windows: []dlqdump.Window{closed, open}})
	if err := r2.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(dst.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(dst.got()); n != 1 {
		t.Fatalf("%d delivered inside the window", n)
	}
}

func TestRestorerConfigErrorsNameTheField(t *testing.T) {
	rd := &fs.Reader{Directory: t.TempDir()}
	dst := &dest{}
	dec := decoder.Fallthrough{}
	for _, tc := range []struct {
		c     *dlqdump.Config
		field string
	}{
		{nil, "nil Config"},
		{&dlqdump.Config{Decoder: dec, Queue: dst}, "Reader"},
		{&dlqdump.Config{Reader: rd, Queue: dst}, "Decoder"},
		{&dlqdump.Config{Reader: rd, Decoder: dec}, "Queue"},
		{&dlqdump.Config{Reader: rd, Decoder: dec, Queue: dst, AllowRate: 1.5}, "AllowRate"},
		{&dlqdump.Config{Reader: rd, Decoder: dec, Queue: dst, RateLimit: -1}, "RateLimit"},
		{&dlqdump.Config{Reader: rd, Decoder: dec, Queue: dst, Lease: time.Millisecond}, "Lease"},
		{&dlqdump.Config{Reader: rd, Decoder: dec, Queue: dst, RetryBase: time.Second, RetryMax: time.Millisecond}, "RetryBase"},
		{&dlqdump.Config{Reader: rd, Decoder: dec, Queue: dst, VersionPolicy: 7}, "VersionPolicy"},
		{&dlqdump.Config{Reader: rd, Decoder: dec, Queue: dst, Windows: []dlqdump.Window{{Start: time.Hour, End: time.Hour}}}, "Windows[0]"},
	} {
		_, err := dlqdump.NewRestorer(tc.c)
		if !errors.Is(err, dlqdump.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("NewRestorer = %v, want ErrConfig naming %s", err, tc.field)
		}
	}
}

func init() {
	children["heap-restore"] = heapRestoreChild
}

// heapRestoreChild dumps DLQDUMP_SIZE bytes of random 16 KiB records into
// one segment in DLQDUMP_DIR, restores it, and prints the peak heap in use
// while restoring, in bytes. A process of its own, so that no other test's
// memory counts.
func heapRestoreChild() int {
	size, _ := strconv.ParseInt(os.Getenv("DLQDUMP_SIZE"), 10, 64)
	dir := os.Getenv("DLQDUMP_DIR")
	// 16 KiB records of random bytes, stored raw so the file is really that big.
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 2 * dlqdump.Gigabyte, Codec: dlqdump.NoCompression, MaxPending: 8 * dlqdump.Megabyte, EnqueueTimeout: 5 * time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rec := make([]byte, 16<<10)
	rng := rand.New(rand.NewPCG(5, 6))
	n := int(size / int64(len(rec)))
	for i := range n {
		for j := 0; j < len(rec); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				rec[j+k] = byte(v >> (8 * k))
			}
		}
		if err := q.Enqueue(rec); err != nil {
			fmt.Fprintf(os.Stderr, "record %d: %v\n", i, err)
			return 1
		}
	}
	if err := q.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var count atomic.Int64
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{},
		Queue: queueFunc(func(any) error { count.Add(1); return nil })})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	runtime.GC()
	if err := r.Restore(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	close(stop)
	<-sampled
	if count.Load() != int64(n) {
		fmt.Fprintf(os.Stderr, "restored %d of %d\n", count.Load(), n)
		return 1
	}
	fmt.Println(peak)
	return 0
}

// Restoring a large segment (256 MiB; 1 GiB in the full run) keeps the heap
// bounded by a few blocks.
func TestRestoreLargeSegmentHeapBounded(t *testing.T) {
	t.Parallel() // the heap measured is a child process's own
	// CI's size, four times the bound; cmd/dlqdump-reliability's "full
	// tests" (DLQDUMP_FULL=1 or DLQDUMP_HEAP_FULL=1) restores 1 GiB.
	size := int64(256 << 20)
	if fullRun("HEAP") {
		size = 1 << 30
	}
	if testing.Short() {
		t.Log("-short: restoring a 128 MiB segment instead of 256 MiB")
		size = 128 << 20
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=heap-restore", "DLQDUMP_DIR="+t.TempDir(), "DLQDUMP_SIZE="+strconv.FormatInt(size, 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	peak, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("child printed %q", out)
	}
	t.Logf("restored %d MiB: peak heap in use %.1f MiB", size>>20, float64(peak)/(1<<20))
	if peak > 64<<20 {
		t.Fatalf("peak heap %d MiB while restoring a %d MiB segment", peak>>20, size>>20)
	}
}

var _ = json.Valid
var _ = segment.Ext

// A selective pass moves nothing it does not select: a segment of another
// Version stays ready (counted), and only a pass over everything applies the
// VersionPolicy to it.
func TestSelectivePassLeavesOtherVersions(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := dlqdump.NewVersion(1, 0, 0, 0), dlqdump.NewVersion(2, 0, 0, 0)
	dumpItems(t, dir, dlqdump.Config{Version: v1}, []string{"old-1", "old-2", "old-3"})
	dumpItems(t, dir, dlqdump.Config{Version: v2}, []string{"new-1"})
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Version: v2, Reader: &fs.Reader{Directory: dir}, Queue: dst})
	since := time.Now().Add(-time.Hour)
	for _, dry := range []bool{true, false} {
		rep, err := r.Run(t.Context(), dlqdump.RunOptions{Since: since, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OtherVersionSegments != 1 || rep.Skipped != 3 || rep.QuarantinedSegments != 0 || rep.Quarantined != 0 {
			t.Fatalf("dry run %v: report %+v: want the old segment left, its 3 records skipped", dry, rep)
		}
	}
	if got := dst.got(); !slices.Equal(got, []string{"new-1"}) {
		t.Fatalf("delivered %q", got)
	}
	if n := len(segmentsIn(t, dir)); n != 1 {
		t.Fatalf("%d segments ready, want the old version's", n)
	}
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.QuarantinedSegments != 1 || rep.OtherVersionSegments != 0 {
		t.Fatalf("a pass over everything: %+v, want the old segment quarantined", rep)
	}
}

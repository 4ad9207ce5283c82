package dlqdump_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// fullRun tells whether the tests run their full size rather than CI's
// deterministic sample: DLQDUMP_FULL=1 (cmd/dlqdump-reliability's "full
// tests" section sets it and lists the tests that read it) or the test's own
// DLQDUMP_<name>_FULL=1.
func fullRun(name string) bool {
	return os.Getenv("DLQDUMP_FULL") != "" || os.Getenv("DLQDUMP_"+name+"_FULL") != ""
}

// dumped is one record read back from a directory.
type dumped struct {
	Segment string
	Seq     uint64
	Time    int64
	Headers map[string]string
	Payload string
}

// readDir reads every sealed segment in dir, oldest first, failing the test
// on any damage or unsealed segment.
func readDir(t testing.TB, dir string) []dumped {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []dumped
	for _, path := range names {
		out = append(out, readSegment(t, path)...)
	}
	return out
}

func readSegment(t testing.TB, path string) []dumped {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := segment.NewReader(f, st.Size(), &segment.ReaderOptions{Name: filepath.Base(path)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Sealed() {
		t.Fatalf("%s is not sealed: %v", path, r.FooterError())
	}
	var out []dumped
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dumped{Segment: filepath.Base(path), Seq: rec.Seq, Time: rec.Time, Headers: rec.Headers.Map(), Payload: string(rec.Payload)})
	}
}

// leftovers lists files in dir that are not published segments.
func leftovers(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) == segment.Ext && e.Name()[0] != '.' {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

// faultyWriter wraps a Writer and makes its segment writes fail on demand.
type faultyWriter struct {
	dlqdump.Writer
	failWrites  atomic.Int64 // number of upcoming Write calls that fail
	failSyncs   atomic.Int64
	failCommits atomic.Int64
	block       chan struct{} // when non-nil, Write waits on it
	// everyN makes one call in N of each kind fail (0: never), for the first
	// faultCalls calls of that kind.
	everyN, faultCalls int
	mu                 sync.Mutex
	calls              map[string]int
}

var errInjected = errors.New("injected fault: no space left on device")

// count counts a call of kind op and reports whether the pattern says it
// fails.
func (w *faultyWriter) count(op string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	w.calls[op]++
	n := w.calls[op]
	if w.everyN > 0 && n <= w.faultCalls && n%w.everyN == w.everyN/2 {
		w.calls[op+"-failed"]++
		return true
	}
	return false
}

func (w *faultyWriter) failed(op string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[op+"-failed"]
}

func (w *faultyWriter) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	sw, err := w.Writer.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultySegment{SegmentWriter: sw, w: w}, nil
}

type faultySegment struct {
	sink.SegmentWriter
	w *faultyWriter
}

func take(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

func (s *faultySegment) Write(p []byte) (int, error) {
	fail := s.w.count("write")
	if s.w.block != nil {
		<-s.w.block
	}
	if take(&s.w.failWrites) || fail {
		// A partial write, as a full disk gives.
		n, _ := s.SegmentWriter.Write(p[:len(p)/2])
		return n, errInjected
	}
	return s.SegmentWriter.Write(p)
}

func (s *faultySegment) Sync() error {
	if s.w.count("sync") || take(&s.w.failSyncs) {
		return errInjected
	}
	return s.SegmentWriter.Sync()
}

func (s *faultySegment) Commit(ctx context.Context) error {
	if s.w.count("commit") || take(&s.w.failCommits) {
		return errInjected
	}
	return s.SegmentWriter.Commit(ctx)
}

func (s *faultySegment) Close() error {
	if c, ok := s.SegmentWriter.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func segmentReader(f *os.File, size int64) (*segment.Reader, error) {
	return segment.NewReader(f, size, nil)
}

// checkSegmentOrder checks that got, the payloads a restore delivered from
// records (the segments' records read before it, readDir), holds every
// record once and the records of each segment in the segment's order: the
// segments in flight deliver at once, each in its own order.
func checkSegmentOrder(t testing.TB, records []dumped, got []string) {
	t.Helper()
	type place struct {
		segment string
		seq     uint64
	}
	at := make(map[string]place, len(records))
	for _, d := range records {
		at[d.Payload] = place{d.Segment, d.Seq}
	}
	last := map[string]uint64{}
	seen := make(map[string]bool, len(got))
	for i, p := range got {
		pl, ok := at[p]
		switch {
		case !ok:
			t.Fatalf("delivered %q, which was not dumped", p)
		case seen[p]:
			t.Fatalf("%q delivered twice", p)
		}
		seen[p] = true
		if n, ok := last[pl.segment]; ok && pl.seq <= n {
			t.Fatalf("delivery %d is record %d of %s, after its record %d: not the segment's order", i, pl.seq, pl.segment, n)
		}
		last[pl.segment] = pl.seq
	}
	if len(seen) != len(at) {
		t.Fatalf("delivered %d of %d records", len(seen), len(at))
	}
}

// checkKills checks the crash promise over the rounds of a restorer
// killed at the end of each round but the last: a record delivered in a
// round and again in a later one was at risk when that round's process was
// killed, and what each kill puts at risk is at most one block (maxBlock
// records) of each segment in flight (at most inFlight segments). records
// are the segments' records read before the restore (readDir), by payload.
// It returns the records delivered twice in all, and the most segments one
// kill put records of at risk.
func checkKills(t testing.TB, records []dumped, rounds [][]string, maxBlock, inFlight int) (dups, segments int) {
	t.Helper()
	segOf := make(map[string]string, len(records))
	for _, d := range records {
		segOf[d.Payload] = d.Segment
	}
	last := map[string]int{} // the last round that delivered a record
	for k, round := range rounds {
		for _, p := range round {
			last[p] = k
		}
	}
	for k, round := range rounds {
		risk := map[string]int{} // by segment, of the records delivered again later
		for _, p := range round {
			if last[p] > k {
				risk[segOf[p]]++
				dups++
			}
		}
		segments = max(segments, len(risk))
		if len(risk) > inFlight {
			t.Fatalf("kill %d: records of %d segments delivered again, more than the %d in flight: %v", k+1, len(risk), inFlight, risk)
		}
		for seg, n := range risk {
			if n > maxBlock {
				t.Fatalf("kill %d: %d records of segment %s delivered again, more than one block (%d)", k+1, n, seg, maxBlock)
			}
		}
	}
	return dups, segments
}

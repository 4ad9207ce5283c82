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
	"github.com/dlqdump/dlqdump/fs"
)

// shutdownWithin runs q.Shutdown with a deadline of d and returns its error;
// it fails the test if Shutdown has not returned long after the deadline
// (only a hang gets there, whatever the machine's load).
func shutdownWithin(t *testing.T, q *dlqdump.Queue, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res := make(chan error, 1)
	start := time.Now()
	go func() { res <- q.Shutdown(ctx) }()
	select {
	case err := <-res:
		t.Logf("Shutdown with a %s deadline returned after %s: %v", d, time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(d + time.Minute):
		t.Fatalf("Shutdown with a %s deadline has not returned after %s", d, time.Since(start).Round(time.Millisecond))
		return nil
	}
}

func shutdownError(t *testing.T, err error) *dlqdump.ShutdownError {
	t.Helper()
	var se *dlqdump.ShutdownError
	if !errors.As(err, &se) || !errors.Is(err, dlqdump.ErrNotStored) {
		t.Fatalf("Shutdown = %v, want a *ShutdownError wrapping ErrNotStored", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want it to wrap the context's error", err)
	}
	return se
}

// gate blocks the callers of wait until it is opened; the test opens it at
// cleanup at the latest, so that no goroutine outlives the test.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate(t *testing.T) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait() { <-g.ch }
func (g *gate) isOpen() bool {
	select {
	case <-g.ch:
		return true
	default:
		return false
	}
}

// A sink whose Commit never returns cannot hold Shutdown past its deadline
// (issue 11, defect 8), and the answer counts the sealed segment's records
// as in doubt: neither stored nor lost. When the Commit does return, the
// segment is published: "in doubt" was the true answer.
func TestShutdownBoundedWhenCommitHangs(t *testing.T) {
	dir := t.TempDir()
	hang := newGate(t)
	committed := make(chan error, 1)
	hw := &hookWriter{Writer: &fs.Writer{Directory: dir}}
	hw.hook = func(op string, n int) error {
		if op == "commit" {
			hang.wait()
		}
		return nil
	}
	hw.after = func(op string, err error) {
		if op == "commit" {
			committed <- err
		}
	}
	q := newQueue(t, dlqdump.Config{Writer: hw, FlushInterval: time.Hour})
	const n = 40
	for i := range n {
		if err := q.Enqueue(fmt.Sprintf("record-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	se := shutdownError(t, shutdownWithin(t, q, 300*time.Millisecond))
	if se.InDoubt != n || se.NotWritten != 0 || se.NotSynced != 0 || se.Held != 0 {
		t.Fatalf("Shutdown counted %+v, want all %d records in doubt (inside the Commit)", *se, n)
	}
	if !errors.Is(se, dlqdump.ErrInDoubt) || errors.Is(se, dlqdump.ErrNotWritten) {
		t.Fatalf("Shutdown = %v: wrong sentinels", se)
	}
	if st := q.Stats(); st.Segments != 0 {
		t.Fatalf("Stats = %+v: a segment counted as committed while its Commit hangs", st)
	}
	hang.open()
	if err := <-committed; err != nil {
		t.Fatalf("the held Commit failed: %v", err)
	}
	if got := readDir(t, dir); len(got) != n {
		t.Fatalf("%d records published once the Commit returned, want %d", len(got), n)
	}
}

// A sink whose writes never return cannot hold Shutdown past its deadline
// either; every Durable caller is told exactly what became of its record,
// and the counts of Shutdown's error are those answers' counts.
func TestShutdownBoundedWhenWritesHang(t *testing.T) {
	dir := t.TempDir()
	hang := newGate(t)
	writing := make(chan struct{}, 1)
	hw := &hookWriter{Writer: &fs.Writer{Directory: dir}}
	hw.hook = func(op string, n int) error {
		if op == "write" && n >= 2 { // the header passes, the first block hangs
			select {
			case writing <- struct{}{}:
			default:
			}
			hang.wait()
		}
		return nil
	}
	events := newDumpEvents()
	q := newQueue(t, dlqdump.Config{Writer: hw, Durable: true, EnqueueTimeout: time.Minute, MetricsWriter: events})
	const n = 40
	results := make(chan error, n)
	go func() { results <- q.Enqueue("first") }()
	<-events.dumped
	<-writing // the first block's write hangs
	for i := 1; i < n; i++ {
		go func() { results <- q.Enqueue(fmt.Sprintf("record-%02d", i)) }()
		<-events.dumped
	}
	se := shutdownError(t, shutdownWithin(t, q, 300*time.Millisecond))
	counts := map[error]int{}
	for range n {
		err := <-results
		switch {
		case errors.Is(err, dlqdump.ErrInDoubt):
			counts[dlqdump.ErrInDoubt]++
		case errors.Is(err, dlqdump.ErrNotWritten):
			counts[dlqdump.ErrNotWritten]++
		default:
			t.Fatalf("Durable Enqueue = %v, want ErrInDoubt or ErrNotWritten", err)
		}
		if !errors.Is(err, dlqdump.ErrClosed) {
			t.Fatalf("Durable Enqueue = %v, want it to wrap ErrClosed too", err)
		}
	}
	if counts[dlqdump.ErrInDoubt] != 1 || se.InDoubt != 1 || se.NotWritten != n-1 || counts[dlqdump.ErrNotWritten] != n-1 || se.NotSynced != 0 {
		t.Fatalf("Shutdown counted %+v; the callers were told %v; want 1 in doubt (the hanging write) and %d not written", *se, counts, n-1)
	}
}

// Every error says exactly what was stored (issue 11, defect 4): a Durable
// record written into the open segment but not synced when Shutdown gave up
// is reported as ErrNotSynced, and the next start publishes it; one not
// written is reported as ErrNotWritten and is not in the dump. A caller that
// dumps the ErrNotWritten records again, and only those, ends with each
// record once.
func TestShutdownErrorsMatchTheDump(t *testing.T) {
	t.Run("sync hangs", func(t *testing.T) {
		dir := t.TempDir()
		hang := newGate(t)
		syncing := make(chan struct{})
		closed := make(chan struct{})
		hw := &hookWriter{Writer: &fs.Writer{Directory: dir}}
		hw.hook = func(op string, n int) error {
			if op == "sync" && n == 1 {
				close(syncing)
				hang.wait()
			}
			return nil
		}
		hw.after = func(op string, err error) {
			if op == "close" {
				close(closed)
			}
		}
		events := newDumpEvents()
		q := newQueue(t, dlqdump.Config{Writer: hw, Durable: true, EnqueueTimeout: time.Minute, MetricsWriter: events})
		results := map[string]chan error{}
		enqueue := func(p string) {
			results[p] = make(chan error, 1)
			go func() { results[p] <- q.Enqueue(p) }()
			<-events.dumped
		}
		enqueue("synced-never")
		<-syncing
		for i := range 5 {
			enqueue(fmt.Sprintf("waiting-%d", i))
		}
		se := shutdownError(t, shutdownWithin(t, q, 300*time.Millisecond))
		if se.NotSynced != 1 || se.NotWritten != 5 || se.InDoubt != 0 {
			t.Fatalf("Shutdown counted %+v, want 1 not synced and 5 not written", *se)
		}
		hang.open() // the sync returns; the Queue's loop releases the segment
		<-closed
		checkAnswers(t, dir, results)
	})
	t.Run("next write fails", func(t *testing.T) {
		for round := 1; ; round++ {
			if nextWriteFailsRound(t) {
				t.Logf("scenario reached in round %d", round)
				return
			}
			if round == 30 {
				t.Fatalf("%d rounds did not reach a Shutdown with a written block not synced", round)
			}
		}
	})
}

// nextWriteFailsRound: the first sync fails (held until a second block is
// cut), the retry writes the first block again and, if the second block is
// compressed by then, its write comes next and fails from then on, so
// Shutdown finds the first block written and not synced. It reports whether
// that scenario was reached (otherwise the first block is synced first).
func nextWriteFailsRound(t *testing.T) (reached bool) {
	dir := t.TempDir()
	release := make(chan struct{})
	syncing := make(chan struct{})
	decided := make(chan bool, 1)
	var mu sync.Mutex
	truncated, rewritten, failing := false, false, false
	hw := &hookWriter{Writer: &fs.Writer{Directory: dir}}
	hw.hook = func(op string, n int) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op == "sync" && n == 1:
			mu.Unlock()
			close(syncing)
			<-release
			mu.Lock()
			return errInjected
		case failing && op == "write":
			return errInjected
		case op == "truncate":
			truncated = true
		case truncated && !rewritten && op == "write":
			rewritten = true // the first block, written again
		case rewritten && !failing:
			// The op after the rewrite: the second block's write (the
			// scenario) or the first block's sync.
			failing = true
			decided <- op == "write"
			if op == "write" {
				return errInjected
			}
		}
		return nil
	}
	events := newDumpEvents()
	q := newQueue(t, dlqdump.Config{Writer: hw, Durable: true, EnqueueTimeout: time.Minute, FlushInterval: time.Hour, MetricsWriter: events})
	results := map[string]chan error{"a": make(chan error, 1), "b": make(chan error, 1)}
	go func() { results["a"] <- q.Enqueue("a") }()
	<-events.dumped
	<-syncing
	go func() { results["b"] <- q.Enqueue("b") }()
	<-events.dumped
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_ = q.Flush(cancelled) // cuts b's block
	close(release)
	reached = <-decided
	se := shutdownError(t, shutdownWithin(t, q, 200*time.Millisecond))
	t.Logf("scenario reached: %v; Shutdown counted %+v", reached, *se)
	if reached && (se.NotSynced != 1 || se.NotWritten != 1) {
		t.Errorf("Shutdown counted %+v, want 1 record not synced and 1 not written", *se)
	}
	checkAnswers(t, dir, results)
	return reached
}

// checkAnswers starts a Queue on dir (recovering what the last one left),
// dumps again every record whose Enqueue failed with ErrNotWritten, and
// checks that every record is then in the dump exactly once and that no
// answer was ErrInDoubt or something else.
func checkAnswers(t *testing.T, dir string, results map[string]chan error) {
	t.Helper()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}})
	answers := map[string]error{}
	for p, ch := range results {
		err := <-ch
		answers[p] = err
		switch {
		case err == nil, errors.Is(err, dlqdump.ErrNotSynced):
		case errors.Is(err, dlqdump.ErrNotWritten):
			if err := q.Enqueue(p); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("Enqueue(%s) = %v, want nil, ErrNotSynced or ErrNotWritten", p, err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range readDir(t, dir) {
		got[r.Payload]++
	}
	for p, err := range answers {
		if got[p] != 1 {
			t.Errorf("record %s is %d times in the dump; its Enqueue said: %v", p, got[p], err)
		}
	}
	if len(got) != len(answers) {
		t.Errorf("dump holds %v, want just %d records", got, len(answers))
	}
	if l := leftovers(t, dir); len(l) > 0 {
		t.Fatalf("files left behind: %v", l)
	}
	if t.Failed() {
		var b strings.Builder
		for p, err := range answers {
			fmt.Fprintf(&b, "\n  %s: %v", p, err)
		}
		t.Logf("answers:%s", b.String())
	}
}

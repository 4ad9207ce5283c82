package dlqdump_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
)

// indexOf returns the index itemsN gave an item.
func indexOf(t testing.TB, x any) int {
	t.Helper()
	s, ok := x.(string)
	if !ok {
		t.Fatalf("item %T", x)
	}
	parts := strings.Split(s, "-")
	if len(parts) < 2 {
		t.Fatalf("item %q", s)
	}
	i, err := strconv.Atoi(parts[1])
	if err != nil {
		t.Fatalf("item %q: %v", s, err)
	}
	return i
}

// outageDest answers each record with what answer says, counting calls and
// the deliveries in flight.
type outageDest struct {
	t      testing.TB
	answer func(i int) error

	mu       sync.Mutex
	got      []int // accepted, in the order of acceptance
	calls    int
	inflight int
	most     int // most deliveries in flight at once
}

func (d *outageDest) Enqueue(x any) error {
	i := indexOf(d.t, x)
	d.mu.Lock()
	d.calls++
	d.inflight++
	d.most = max(d.most, d.inflight)
	d.mu.Unlock()
	err := d.answer(i)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight--
	if err == nil {
		d.got = append(d.got, i)
	}
	return err
}

func (d *outageDest) snapshot() (got []int, calls, most int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got), d.calls, d.most
}

// down is what a destination that is down answers.
var down = fmt.Errorf("%w: connection refused", dlqdump.ErrUnavailable)

// A destination that is down stops the pass at the record it could not take:
// nothing is quarantined, the other segments in flight stop at their next
// record, and the next pass resumes at exactly those records, with one
// delivery at a time and with several: every record is delivered once.
func TestRestoreUnavailableStopsThePass(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			dir := t.TempDir()
			all := itemsN("x", 300)
			dumpItems(t, dir, dlqdump.Config{Capacity: 4 * dlqdump.Kilobyte, BlockSize: dlqdump.Kilobyte, Codec: dlqdump.NoCompression}, all)
			segs := len(segmentsIn(t, dir))
			if segs < 3 {
				t.Fatalf("%d segments, want several", segs)
			}
			const at = 121 // accepted before the outage: in the middle of a block
			var mu sync.Mutex
			accepted := 0
			dst := &outageDest{t: t, answer: func(int) error {
				mu.Lock()
				defer mu.Unlock()
				if accepted >= at {
					return down
				}
				accepted++
				return nil
			}}
			r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Concurrency: conc,
				MaxAttempts: 2, RetryBase: time.Microsecond, RetryMax: time.Microsecond})
			rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
			if !errors.Is(err, dlqdump.ErrUnavailable) {
				t.Fatalf("Run: %v, want ErrUnavailable", err)
			}
			t.Logf("Run: %v", err)
			// The destination accepted at records; with Concurrency,
			// up to conc-1 of them came after the record the pass
			// stopped at, and are delivered again.
			if rep.Quarantined != 0 || rep.Delivered > at || rep.Delivered+uint64(conc-1) < at {
				t.Fatalf("report %+v, want %d delivered (at most %d fewer), none quarantined", rep, at, conc-1)
			}
			if q := readDir(t, dir+"/quarantine"); len(q) != 0 {
				t.Fatalf("%d records quarantined", len(q))
			}
			got, calls, most := dst.snapshot()
			if most > conc {
				t.Fatalf("%d deliveries in flight at once, Concurrency %d", most, conc)
			}
			// Record at was tried twice; the others after it at most
			// once each, and only those in the window.
			if calls > len(got)+2+(conc-1)*2 {
				t.Fatalf("%d calls for %d records accepted: the pass went on after the outage", calls, len(got))
			}

			dst.answer = func(int) error { return nil }
			rep2, err := r.Run(t.Context(), dlqdump.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, _, _ = dst.snapshot()
			seen := map[int]int{}
			for _, i := range got {
				seen[i]++
			}
			twice := 0
			for i := range all {
				switch n := seen[i]; {
				case n == 0 || n > 2:
					t.Fatalf("record %d delivered %d times", i, n)
				case n == 2:
					twice++
				}
			}
			if uint64(twice) != at-rep.Delivered {
				t.Fatalf("%d records delivered twice, want the %d accepted after the record the pass stopped at", twice, at-rep.Delivered)
			}
			if rep.Delivered+rep2.Delivered != uint64(len(all)) {
				t.Fatalf("delivered %d + %d, want %d", rep.Delivered, rep2.Delivered, len(all))
			}
			if n := len(segmentsIn(t, dir)); n != 0 {
				t.Fatalf("%d segments left", n)
			}
			if conc == 1 && len(got) != len(all) {
				t.Fatalf("%d deliveries of %d records one at a time", len(got), len(all))
			}
		})
	}
}

// With Concurrency, records are delivered at once, refused ones are set
// aside in record order, and every other record arrives exactly once.
func TestRestoreConcurrentDeliveries(t *testing.T) {
	const conc = 4
	dir := t.TempDir()
	all := itemsN("c", 400)
	dumpItems(t, dir, dlqdump.Config{Capacity: 8 * dlqdump.Kilobyte, BlockSize: dlqdump.Kilobyte}, all)
	// The first conc calls wait for each other: the Restorer must have
	// that many in flight at once.
	var barrier sync.WaitGroup
	barrier.Add(conc)
	var first sync.Mutex
	firsts := 0
	dst := &outageDest{t: t, answer: func(i int) error {
		first.Lock()
		wait := firsts < conc
		firsts++
		first.Unlock()
		if wait {
			barrier.Done()
			barrier.Wait()
		}
		if i%10 == 3 {
			return errors.New("invalid order")
		}
		return nil
	}}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Concurrency: conc, MaxAttempts: 1})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, most := dst.snapshot()
	if most != conc {
		t.Fatalf("at most %d deliveries in flight, want %d", most, conc)
	}
	slices.Sort(got)
	var want []int
	for i := range all {
		if i%10 != 3 {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %d records, want %d, each once", len(got), len(want))
	}
	q := readDir(t, dir+"/quarantine")
	if uint64(len(q)) != rep.Quarantined || len(q) != len(all)/10 {
		t.Fatalf("%d records quarantined, report %+v", len(q), rep)
	}
	for k, d := range q {
		if want := all[10*k+3]; d.Payload != want {
			t.Fatalf("quarantined record %d is %q, want %q", k, d.Payload, want)
		}
	}
	if n := len(segmentsIn(t, dir)); n != 0 {
		t.Fatalf("%d segments left", n)
	}
}

// A pass cancelled while several deliveries are in flight resumes at the
// first record whose delivery had not ended: none is lost, and only records
// after it in the window may arrive twice.
func TestRestoreConcurrentCancel(t *testing.T) {
	const conc, at = 4, 77
	dir := t.TempDir()
	all := itemsN("k", 200)
	dumpItems(t, dir, dlqdump.Config{Capacity: 8 * dlqdump.Kilobyte, BlockSize: dlqdump.Kilobyte}, all)
	ctx, cancel := context.WithCancel(t.Context())
	dst := &outageDest{t: t, answer: func(i int) error {
		if i == at {
			cancel()
			return errors.New("interrupted")
		}
		return nil
	}}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Concurrency: conc, MaxAttempts: 1})
	rep, err := r.Run(ctx, dlqdump.RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	dst.answer = func(int) error { return nil }
	rep2, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first pass %+v, second %+v", rep, rep2)
	got, _, _ := dst.snapshot()
	seen := map[int]int{}
	for _, i := range got {
		seen[i]++
	}
	// The deliveries in flight when the pass was cancelled are not all
	// waited for: one that had not reached the destination stops the pass
	// there, and those after it in the window that had reached it are
	// delivered again (at most conc-1, all within the window around the
	// record that cancelled).
	twice := 0
	for i := range all {
		n := seen[i]
		if n == 0 || n > 2 || n == 2 && (i <= at-conc || i >= at+conc) {
			t.Fatalf("record %d delivered %d times", i, n)
		}
		if n == 2 {
			twice++
		}
	}
	if twice > conc-1 {
		t.Fatalf("%d records delivered twice, more than the %d a window of %d holds after its first", twice, conc-1, conc)
	}
	if q := readDir(t, dir+"/quarantine"); len(q) != 0 {
		t.Fatalf("%d records quarantined by a cancellation", len(q))
	}
}

// Limit bounds what a pass offers the destination, refused or not: a
// destination refusing everything gets Limit records, not the whole dump.
func TestRestoreLimitBoundsAttempts(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			dir := t.TempDir()
			all := itemsN("l", 50)
			dumpItems(t, dir, dlqdump.Config{BlockSize: dlqdump.Kilobyte}, all)
			dst := &outageDest{t: t, answer: func(i int) error {
				if i%2 == 0 {
					return errors.New("poison")
				}
				return nil
			}}
			r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Concurrency: conc, MaxAttempts: 1})
			rep, err := r.Run(t.Context(), dlqdump.RunOptions{Limit: 7})
			if err != nil {
				t.Fatal(err)
			}
			_, calls, _ := dst.snapshot()
			if calls != 7 || rep.Delivered+rep.Quarantined != 7 || rep.Quarantined != 4 {
				t.Fatalf("%d calls, report %+v; want 7 calls: 4 refused, 3 delivered", calls, rep)
			}
			rep, err = r.Run(t.Context(), dlqdump.RunOptions{DryRun: true})
			if err != nil || rep.Delivered != 43 {
				t.Fatalf("dry run after the limit: %+v %v; want 43 left", rep, err)
			}
		})
	}
}

// roomlessDest is a destination that stays full: a pass waits for room, and
// says so on waiting once.
type roomlessDest struct {
	waiting chan struct{}
	once    sync.Once
}

func (d *roomlessDest) Enqueue(any) error { return errors.New("full") }
func (d *roomlessDest) Rate() float32 {
	d.once.Do(func() { close(d.waiting) })
	return 1
}

// Issue 20: closing a started Restorer while its pass waited for room
// logged "WARN restore pass failed ... dlqdump: closed" (the demo printed it
// on every Ctrl-C). Close is no failure: nothing is logged at warning level.
func TestCloseDuringPassLogsNoWarning(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{}, []string{"a", "b"})
	var logs safeBuffer
	dst := &roomlessDest{waiting: make(chan struct{})}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dst,
		AllowRate: 0.5, PostponeInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	<-dst.waiting
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); s != "" {
		t.Fatalf("Close logged:\n%s", s)
	}
}

// safeBuffer is a bytes.Buffer safe for concurrent use.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

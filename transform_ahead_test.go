package dlqdump_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/transform"
)

// dumpNumbered dumps n records {"n":i,"email":...} in small blocks over
// several segments; every 500th record's email is a number (a jq fix
// refuses it).
func dumpNumbered(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 256 * dlqdump.Kilobyte, BlockSize: 8 * dlqdump.Kilobyte})
	for i := range n {
		p := fmt.Sprintf(`{"n":%d,"email":"User%d@EXAMPLE.com"}`, i, i)
		if i%500 == 7 {
			p = fmt.Sprintf(`{"n":%d,"email":%d}`, i, i)
		}
		if err := q.Enqueue([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// orderedDest records the records delivered, failing the test on one out
// of order or delivered twice.
type orderedDest struct {
	t         *testing.T
	mu        sync.Mutex
	last      int
	seen      map[int]string
	unordered bool // Concurrency above 1: in flight at once, in any order
}

func newOrderedDest(t *testing.T) *orderedDest {
	return &orderedDest{t: t, last: -1, seen: map[int]string{}}
}

func (d *orderedDest) Enqueue(x any) error {
	var v struct{ N int }
	if err := json.Unmarshal(x.([]byte), &v); err != nil {
		d.t.Errorf("delivered %q: %v", x, err)
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.seen[v.N]; dup || v.N <= d.last && !d.unordered {
		d.t.Errorf("record %d delivered after %d (twice: %v)", v.N, d.last, dup)
	}
	d.last, d.seen[v.N] = max(d.last, v.N), string(x.([]byte))
	return nil
}

// TestTransformAhead: with TransformWorkers, a jq fix over 20,000 records in
// ~150 blocks and several segments in flight delivers every record in
// order (with Concurrency 1), once, fixed as one at a time does, and
// quarantines the same.
func TestTransformAhead(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepLayout=%v", keep), func(t *testing.T) { transformAhead(t, keep) })
	}
}

// transformAhead runs TestTransformAhead; with keep, the fix is made in
// place in the block's bytes (transform.Options.KeepLayout).
func transformAhead(t *testing.T, keep bool) {
	const n = 20_000
	jq, err := transform.CompileJQ(`.payload.email |= ascii_downcase`, &transform.Options{KeepLayout: keep})
	if err != nil {
		t.Fatal(err)
	}
	format := `{"email":"user%d@example.com","n":%d}`
	if keep {
		format = `{"n":%[2]d,"email":"user%[1]d@example.com"}`
	}
	want := map[int]string{}
	for _, tc := range []struct{ workers, concurrency int }{{0, 1}, {4, 1}, {3, 4}} {
		workers := tc.workers
		dir := dumpNumbered(t, n)
		dest := newOrderedDest(t)
		dest.unordered = tc.concurrency > 1
		r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dest, Concurrency: tc.concurrency})
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{Transform: jq.Transform, TransformWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Delivered != n-n/500 || rep.Quarantined != n/500 || len(dest.seen) != n-n/500 {
			t.Fatalf("workers %d: delivered %d (%d distinct), quarantined %d", workers, rep.Delivered, len(dest.seen), rep.Quarantined)
		}
		for i, p := range dest.seen {
			if workers == 0 {
				want[i] = p
				if w := fmt.Sprintf(format, i, i); p != w {
					t.Fatalf("record %d delivered as %s, want %s", i, p, w)
				}
			} else if p != want[i] {
				t.Fatalf("record %d delivered as %s ahead, %s one at a time", i, p, want[i])
			}
		}
		quar := readDir(t, filepath.Join(dir, fs.QuarantineDir))
		if len(quar) != n/500 {
			t.Fatalf("workers %d: %d records quarantined", workers, len(quar))
		}
		for _, q := range quar { // as stored
			var i int
			if _, err := fmt.Sscanf(q.Payload, `{"n":%d,`, &i); err != nil || q.Payload != fmt.Sprintf(`{"n":%d,"email":%d}`, i, i) {
				t.Fatalf("workers %d: quarantined %s, not as stored", workers, q.Payload)
			}
		}
	}
}

// A Transform that says a service is down at a record, with records of the
// block after it transformed ahead: the pass stops at that record, having
// delivered every record before it, and the next pass goes on from it.
// So does a Limit in the middle of a block. Nothing is delivered twice
// nor lost.
func TestTransformAheadStops(t *testing.T) {
	const n, downAt, limit = 6000, 2345, 1000
	dir := dumpNumbered(t, n)
	dest := newOrderedDest(t)
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dest})
	var down atomic.Bool
	down.Store(true)
	var calls atomic.Int64
	tr := func(_ context.Context, rec *dlqdump.Replay) error {
		calls.Add(1)
		if down.Load() && bytes.HasPrefix(rec.Payload, []byte(fmt.Sprintf(`{"n":%d,`, downAt))) {
			return fmt.Errorf("enricher: %w", dlqdump.ErrUnavailable)
		}
		rec.Payload = bytes.ToLower(rec.Payload)
		return nil
	}
	opts := dlqdump.RunOptions{Transform: tr, TransformWorkers: 3, Limit: limit}
	rep, err := r.Run(context.Background(), opts)
	if err != nil || rep.Delivered+rep.Quarantined != limit {
		t.Fatalf("with a limit: %v, delivered %d, quarantined %d", err, rep.Delivered, rep.Quarantined)
	}
	opts.Limit = 0
	_, err = r.Run(context.Background(), opts)
	if !errors.Is(err, dlqdump.ErrUnavailable) || !strings.Contains(err.Error(), "record") {
		t.Fatalf("down: %v", err)
	}
	if dest.last != downAt-1 || len(dest.seen) != downAt {
		t.Fatalf("stopped after record %d (%d delivered), want after %d", dest.last, len(dest.seen), downAt-1)
	}
	if calls.Load() <= int64(downAt) {
		t.Fatalf("the Transform was called %d times: nothing was transformed ahead", calls.Load())
	}
	down.Store(false)
	rep, err = r.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(dest.seen) != n || dest.last != n-1 || rep.Quarantined != 0 {
		t.Fatalf("%d delivered in all, the last %d; %d quarantined", len(dest.seen), dest.last, rep.Quarantined)
	}
}

// A record a Transform makes larger than MaxRecordSize is quarantined with
// that said, one at a time and ahead.
func TestTransformTooLarge(t *testing.T) {
	for _, workers := range []int{1, 2} {
		dir := dumpNumbered(t, 1000)
		dest := newOrderedDest(t)
		r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dest, MaxRecordSize: 64 * dlqdump.Kilobyte})
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{TransformWorkers: workers, Transform: func(_ context.Context, rec *dlqdump.Replay) error {
			if bytes.Contains(rec.Payload, []byte(`"n":99,`)) {
				rec.Payload = bytes.Repeat([]byte(" "), 100<<10)
			}
			return nil
		}})
		if err != nil || rep.Quarantined != 1 || rep.Delivered != 999 {
			t.Fatalf("workers %d: %v: delivered %d, quarantined %d", workers, err, rep.Delivered, rep.Quarantined)
		}
		quar := readDir(t, filepath.Join(dir, fs.QuarantineDir))
		if len(quar) != 1 || !strings.Contains(quar[0].Headers[dlqdump.HeaderQuarantine], "more than Config.MaxRecordSize") || !strings.HasPrefix(quar[0].Payload, `{"n":99,`) {
			t.Fatalf("quarantined: %v", quar)
		}
	}
}

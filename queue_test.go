package dlqdump_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/encoder"
	"github.com/dlqdump/dlqdump/fs"
)

func newQueue(t testing.TB, c dlqdump.Config) *dlqdump.Queue {
	t.Helper()
	if c.Capacity == 0 {
		c.Capacity = dlqdump.Megabyte
	}
	q, err := dlqdump.NewQueue(&c)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// slowWorker processes items slowly and records them.
type slowWorker struct {
	delay time.Duration
	mu    sync.Mutex
	seen  map[string]int
}

func (w *slowWorker) Do(x any) error {
	time.Sleep(w.delay)
	w.mu.Lock()
	w.seen[string(x.([]byte))]++
	w.mu.Unlock()
	return nil
}

// A real koykov queue with a small capacity and slow workers, its DLQ set to
// the dumper, flooded from several goroutines: every item is processed by a
// worker or dumped, byte for byte, exactly once.
func TestKoykovQueueFlood(t *testing.T) {
	dir := t.TempDir()
	dump := newQueue(t, dlqdump.Config{
		Capacity:      256 * dlqdump.Kilobyte,
		Writer:        &fs.Writer{Directory: dir},
		FlushInterval: 100 * time.Millisecond,
		Source:        "orders",
	})
	w := &slowWorker{delay: 200 * time.Microsecond, seen: map[string]int{}}
	src, err := queue.New(&queue.Config{Capacity: 16, Workers: 2, Worker: w, DLQ: dump})
	if err != nil {
		t.Fatal(err)
	}
	const producers, perProducer = 4, 5000
	var wg sync.WaitGroup
	var refused atomic.Int64
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				// Items of varied sizes with a recognisable body.
				item := []byte(fmt.Sprintf("p%d-i%05d-%s", p, i, strings.Repeat("x", (i*7)%300)))
				if err := src.Enqueue(item); err != nil {
					refused.Add(1)
					t.Errorf("enqueue: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	// Wait for the workers to drain the queue.
	deadline := time.Now().Add(30 * time.Second)
	for src.Size() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the last Do in progress
	if err := dump.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readDir(t, dir)
	got := map[string]int{}
	for _, r := range recs {
		got[r.Payload]++
		if r.Headers[dlqdump.HeaderSource] != "orders" {
			t.Fatalf("record %q has headers %v", r.Payload, r.Headers)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var processed, dumpedN int
	for p := range producers {
		for i := range perProducer {
			item := fmt.Sprintf("p%d-i%05d-%s", p, i, strings.Repeat("x", (i*7)%300))
			pc, dc := w.seen[item], got[item]
			if pc+dc != 1 {
				t.Fatalf("item %q processed %d times and dumped %d times", item[:12], pc, dc)
			}
			processed += pc
			dumpedN += dc
		}
	}
	if len(recs) != dumpedN {
		t.Fatalf("%d records in the dump, %d of them expected", len(recs), dumpedN)
	}
	if dumpedN == 0 {
		t.Fatal("nothing leaked: the test did not exercise the DLQ")
	}
	t.Logf("processed %d, dumped %d into %d segments", processed, dumpedN, len(segmentsIn(t, dir)))
	if l := leftovers(t, dir); len(l) > 0 {
		t.Fatalf("files left behind: %v", l)
	}
}

func segmentsIn(t testing.TB, dir string) []string {
	names, err := filepath.Glob(filepath.Join(dir, "*.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestEnqueueHeadersAndJobs(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Source: "src"})
	items := []any{
		"plain",
		[]byte("bytes"),
		queue.Job{Payload: "job"},
		&queue.Job{Payload: []byte("job-ptr")},
		dlqdump.Envelope{Item: "env", Headers: dlqdump.Headers{dlqdump.HeaderReason: "leak", dlqdump.HeaderAttempts: "3"}},
		&dlqdump.Envelope{Item: "env-ptr", Headers: dlqdump.Headers{dlqdump.HeaderReason: "failed", dlqdump.HeaderError: "boom", dlqdump.HeaderSource: "other"}},
		queue.Job{Payload: dlqdump.Envelope{Item: "job-env", Headers: dlqdump.Headers{dlqdump.HeaderReason: "deadline"}}},
		&carrier{s: "carried", h: dlqdump.Headers{dlqdump.HeaderReplays: "2"}},
	}
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatalf("%T: %v", it, err)
		}
	}
	if err := q.Enqueue(42); !errors.Is(err, dlqdump.ErrEncode) || !errors.Is(err, encoder.ErrUnsupported) || !strings.Contains(err.Error(), "int") {
		t.Fatalf("Enqueue(42) = %v, want an encode error naming int", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue("late"); !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatalf("Enqueue after Close = %v", err)
	}
	want := []struct {
		payload string
		headers map[string]string
	}{
		{"plain", map[string]string{"source": "src"}},
		{"bytes", map[string]string{"source": "src"}},
		{"job", map[string]string{"source": "src"}},
		{"job-ptr", map[string]string{"source": "src"}},
		{"env", map[string]string{"source": "src", "reason": "leak", "attempts": "3"}},
		{"env-ptr", map[string]string{"source": "other", "reason": "failed", "error": "boom"}},
		{"job-env", map[string]string{"source": "src", "reason": "deadline"}},
		{"carried", map[string]string{"source": "src", "replays": "2"}},
	}
	got := readDir(t, dir)
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Payload != w.payload || fmt.Sprint(got[i].Headers) != fmt.Sprint(w.headers) {
			t.Errorf("record %d = %q %v, want %q %v", i, got[i].Payload, got[i].Headers, w.payload, w.headers)
		}
	}
}

type carrier struct {
	s string
	h dlqdump.Headers
}

func (c *carrier) String() string                  { return c.s }
func (c *carrier) DLQHeaders() dlqdump.Headers     { return c.h }
func (c *carrier) SetDLQHeaders(h dlqdump.Headers) { c.h = h }

// A segment's stored size never exceeds Capacity, except a segment holding a
// single record larger than that.
func TestCapacityBoundsSegments(t *testing.T) {
	dir := t.TempDir()
	const capacity = 16 * dlqdump.Kilobyte
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: capacity, Codec: dlqdump.NoCompression})
	var want []string
	for i := range 3000 {
		p := fmt.Sprintf("%05d-%s", i, strings.Repeat("y", i%97))
		if i%1000 == 999 {
			p = strings.Repeat("B", 40*1024) // bigger than a segment
		}
		want = append(want, p)
		if err := q.Enqueue(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, path := range segmentsIn(t, dir) {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		recs := readSegment(t, path)
		if st.Size() > int64(capacity) && len(recs) != 1 {
			t.Errorf("%s: %d bytes > Capacity %d with %d records", filepath.Base(path), st.Size(), capacity, len(recs))
		}
		for _, r := range recs {
			got = append(got, r.Payload)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records differ: got %d, want %d", len(got), len(want))
	}
}

// A record is published FlushInterval after it entered, without Flush or Close.
func TestFlushInterval(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, FlushInterval: 100 * time.Millisecond})
	defer q.Close()
	if err := q.Enqueue("lonely"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(segmentsIn(t, dir)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no segment published 10s after a FlushInterval of 100ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := readDir(t, dir); len(got) != 1 || got[0].Payload != "lonely" {
		t.Fatalf("got %v", got)
	}
	// Stats count the segment once the writer loop is back from publishing
	// it, a moment after the file appears.
	for s := q.Stats(); s.Segments != 1 || s.Records != 1 || s.Pending != 0; s = q.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v 10s after a FlushInterval of 100ms, want 1 segment, 1 record, 0 pending", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFlush(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, FlushInterval: time.Hour})
	defer q.Close()
	for i := range 10 {
		if err := q.Enqueue(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); len(got) != 10 {
		t.Fatalf("after Flush: %d records published, want 10", len(got))
	}
	// Flush with nothing pending is a no-op.
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentsIn(t, dir)); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
}

// Past MaxPending, Enqueue waits EnqueueTimeout and then refuses with
// ErrBackpressure; Rate reports pending over the limit; nothing accepted is
// lost once the sink recovers.
func TestBackpressure(t *testing.T) {
	dir := t.TempDir()
	fw := &faultyWriter{Writer: &fs.Writer{Directory: dir}, block: make(chan struct{})}
	q := newQueue(t, dlqdump.Config{
		Writer:         fw,
		MaxPending:     64 * dlqdump.Kilobyte,
		BlockSize:      4 * dlqdump.Kilobyte,
		EnqueueTimeout: 50 * time.Millisecond,
	})
	payload := strings.Repeat("z", 1000)
	var accepted int
	var refusal error
	for i := range 1000 {
		err := q.Enqueue(fmt.Sprintf("%04d%s", i, payload))
		if err != nil {
			refusal = err
			break
		}
		accepted++
	}
	if !errors.Is(refusal, dlqdump.ErrBackpressure) {
		t.Fatalf("after %d items: %v, want ErrBackpressure", accepted, refusal)
	}
	if r := q.Rate(); r < 0.9 || r > 1.1 {
		t.Fatalf("Rate() = %v while blocked at the limit", r)
	}
	if q.Size() <= 0 || q.Capacity() != 64*1024 {
		t.Fatalf("Size %d Capacity %d", q.Size(), q.Capacity())
	}
	close(fw.block)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if r := q.Rate(); r != 0 {
		t.Fatalf("Rate() = %v after Close", r)
	}
	if got := readDir(t, dir); len(got) != accepted {
		t.Fatalf("%d records dumped, %d accepted", len(got), accepted)
	}
}

// Failing writes, syncs and commits (a full disk) are retried: every accepted
// record is published exactly once, in order.
func TestSinkFaultsLoseNothing(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			dir := t.TempDir()
			fw := &faultyWriter{Writer: &fs.Writer{Directory: dir}, everyN: 5, faultCalls: 200}
			q := newQueue(t, dlqdump.Config{
				Writer:         fw,
				Capacity:       8 * dlqdump.Kilobyte,
				BlockSize:      1 * dlqdump.Kilobyte,
				Durable:        durable,
				EnqueueTimeout: 30 * time.Second,
			})
			var want []string
			for i := range 3000 {
				p := fmt.Sprintf("rec-%05d-%s", i, strings.Repeat("q", i%50))
				if err := q.Enqueue(p); err != nil {
					t.Fatalf("Enqueue %d: %v", i, err)
				}
				want = append(want, p)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range readDir(t, dir) {
				got = append(got, r.Payload)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("got %d records, want %d (or out of order)", len(got), len(want))
			}
			if fw.failed("write") == 0 || fw.failed("commit") == 0 || durable && fw.failed("sync") == 0 {
				t.Fatalf("faults injected: %d writes, %d syncs, %d commits: not every kind was exercised", fw.failed("write"), fw.failed("sync"), fw.failed("commit"))
			}
			t.Logf("survived %d failed writes, %d failed syncs, %d failed commits", fw.failed("write"), fw.failed("sync"), fw.failed("commit"))
			if l := leftovers(t, dir); len(l) > 0 {
				t.Fatalf("files left behind: %v", l)
			}
		})
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	w := &fs.Writer{Directory: t.TempDir()}
	for _, tc := range []struct {
		c     *dlqdump.Config
		field string
	}{
		{nil, "nil Config"},
		{&dlqdump.Config{Capacity: dlqdump.Megabyte}, "Writer"},
		{&dlqdump.Config{Writer: w}, "Capacity"},
		{&dlqdump.Config{Writer: w, Capacity: 100}, "Capacity"},
		{&dlqdump.Config{Writer: w, Capacity: dlqdump.Megabyte, FlushInterval: -1}, "FlushInterval"},
		{&dlqdump.Config{Writer: w, Capacity: 8 * dlqdump.Kilobyte, BlockSize: 16 * dlqdump.Kilobyte}, "BlockSize"},
		{&dlqdump.Config{Writer: w, Capacity: dlqdump.Megabyte, Codec: 9}, "Codec"},
		{&dlqdump.Config{Writer: w, Capacity: dlqdump.Megabyte, CompressionLevel: 99}, "CompressionLevel"},
	} {
		_, err := dlqdump.NewQueue(tc.c)
		if !errors.Is(err, dlqdump.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("NewQueue(%+v) = %v, want ErrConfig naming %s", tc.c, err, tc.field)
		}
	}
}

func TestCodecs(t *testing.T) {
	for _, codec := range []dlqdump.Codec{dlqdump.Zstd, dlqdump.S2, dlqdump.NoCompression} {
		dir := t.TempDir()
		q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Codec: codec})
		var want bytes.Buffer
		for i := range 2000 {
			p := fmt.Sprintf(`{"id":%d,"name":"user-%d","tags":["a","b"]}`, i, i*31)
			want.WriteString(p)
			if err := q.Enqueue(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		for _, r := range readDir(t, dir) {
			got.WriteString(r.Payload)
		}
		if got.String() != want.String() {
			t.Fatalf("%s: records differ", codec)
		}
	}
}

// A temporary segment left by a crashed writer is sealed and published when
// the next Queue starts, and nothing is left behind.
func TestRecoverOnStart(t *testing.T) {
	dir := t.TempDir()
	fw := &faultyWriter{Writer: &fs.Writer{Directory: dir}}
	q := newQueue(t, dlqdump.Config{Writer: fw, Durable: true, BlockSize: 1024, Capacity: dlqdump.Megabyte})
	for i := range 100 {
		if err := q.Enqueue(fmt.Sprintf("before-crash-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Simulate a crash: the sink refuses the footer forever, Shutdown gives up.
	fw.failWrites.Store(1 << 30)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := q.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown succeeded although the sink fails")
	}
	if len(leftovers(t, dir)) == 0 {
		t.Fatal("no temporary segment left to recover")
	}
	q2 := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}})
	if err := q2.Close(); err != nil {
		t.Fatal(err)
	}
	got := readDir(t, dir)
	if len(got) != 100 {
		t.Fatalf("recovered %d records, want 100", len(got))
	}
	for i, r := range got {
		if r.Payload != fmt.Sprintf("before-crash-%03d", i) {
			t.Fatalf("record %d = %q", i, r.Payload)
		}
	}
	if l := leftovers(t, dir); len(l) > 0 {
		t.Fatalf("files left behind: %v", l)
	}
}

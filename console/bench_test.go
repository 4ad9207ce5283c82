package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// benchRecords is the size of the benchmarks' store.
const benchRecords = 1_000_000

// writeBench writes benchRecords records (realistic ~300-byte JSON
// payloads, headers as makeStore's and an order ID, one per record) through
// a Queue into w, in segments of 16 MiB at most, with summaries or
// (noSummary) without, as before them; the needle is in the last record but
// one. It returns the time record 900,000 entered the dump.
func writeBench(b *testing.B, w dlqdump.Writer, noSummary bool) time.Time {
	b.Helper()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 16 * dlqdump.Megabyte, MaxPending: 256 * dlqdump.Megabyte, NoSummary: noSummary})
	if err != nil {
		b.Fatal(err)
	}
	g := gen.New(1)
	var at time.Time
	for i := range benchRecords {
		p := g.Event(300)
		if i == benchRecords-2 {
			p = []byte(fmt.Sprintf(`{"id":"evt_%d","oncall_note":"%s","user":{"email":"on.call@example.com"}}`, i, needle))
		}
		if i == 900_000 {
			at = time.Now()
		}
		h := dlqdump.Headers{dlqdump.HeaderReason: reasons[i%len(reasons)], dlqdump.HeaderError: errs[i%len(errs)], dlqdump.HeaderSource: "orders",
			"order": fmt.Sprintf("ord-%07d", i)}
		for {
			err := q.Enqueue(dlqdump.Envelope{Item: p, Headers: h})
			if !errors.Is(err, dlqdump.ErrBackpressure) {
				if err != nil {
					b.Fatal(err)
				}
				break
			}
		}
	}
	if err := q.Close(); err != nil {
		b.Fatal(err)
	}
	return at
}

// benchSearches are the searches timed: what an on-call person types.
func benchSearches(at time.Time) []struct {
	name string
	q    url.Values
} {
	return []struct {
		name string
		q    url.Values
	}{
		{"header", url.Values{"where": {"reason=failed"}}},
		{"header+text", url.Values{"where": {"reason=failed"}, "q": {"cart.abandoned"}}},
		{"since", url.Values{"since": {at.UTC().Format(time.RFC3339Nano)}, "where": {"error=invalid currency"}}},
		{"rare-header", url.Values{"where": {fmt.Sprintf("order=ord-%07d", benchRecords-2)}}},
		{"rare-text", url.Values{"q": {needle}}},
		{"rare-jsonpath", url.Values{"path": {"$.user.email"}, "value": {"on.call@example.com"}}},
	}
}

// firstPage asks for pages as the page does, following the cursor until 50
// records are found or the selection ends, and returns how many requests it
// took and the records found.
func firstPage(b *testing.B, base string, q url.Values) (requests, found int) {
	for {
		var p page
		getJSON(b, srvOf(base), "records", q, &p)
		requests++
		found += len(p.Records)
		if found >= 50 || p.Next == "" {
			return requests, found
		}
		q = cloneValues(q)
		q.Set("after", p.Next)
	}
}

func cloneValues(q url.Values) url.Values {
	c := url.Values{}
	for k, v := range q {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// srvOf wraps a base URL for getJSON.
func srvOf(base string) *httptest.Server { return &httptest.Server{URL: base} }

// peakHeap samples the heap every millisecond while it runs and
// returns the largest HeapAlloc seen above the heap after a GC before.
type peakHeap struct {
	base uint64
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startPeak() *peakHeap {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := &peakHeap{base: ms.HeapAlloc, stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > p.base && ms.HeapAlloc-p.base > p.peak.Load() {
				p.peak.Store(ms.HeapAlloc - p.base)
			}
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *peakHeap) end() float64 {
	close(p.stop)
	p.wg.Wait()
	return float64(p.peak.Load()) / (1 << 20)
}

// benchStore runs the searches over a console of rd.
func benchStore(b *testing.B, rd sink.Reader, at time.Time) {
	var segs int
	var size, sums int64
	for si, err := range rd.List(context.Background(), sink.AreaReady) {
		if err != nil {
			b.Fatal(err)
		}
		segs++
		size += si.Size
		f, err := rd.Open(context.Background(), si.Area, si.Name)
		if err != nil {
			b.Fatal(err)
		}
		if sr, err := segment.NewReader(f, f.Size(), nil); err == nil && sr.Footer() != nil {
			sums += sr.Footer().SummaryBytes
		}
		f.Close()
	}
	b.Logf("the store: %d segments, %.1f MiB stored; summaries %d bytes per segment on average (%.2f%% of the stored bytes)",
		segs, float64(size)/(1<<20), sums/int64(max(segs, 1)), 100*float64(sums)/float64(max(size, 1)))
	h, err := console.New(&console.Options{Reader: rd})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/dlq/", http.StripPrefix("/dlq", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, s := range benchSearches(at) {
		b.Run(s.name, func(b *testing.B) {
			var requests, found int
			var peak float64
			start := time.Now()
			for range b.N {
				p := startPeak()
				requests, found = firstPage(b, srv.URL, s.q)
				peak = max(peak, p.end())
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/first-page")
			b.ReportMetric(float64(requests), "requests")
			b.ReportMetric(float64(found), "records")
			b.ReportMetric(peak, "peak-heap-MiB")
		})
	}
}

// BenchmarkFirstPage times the first page of a filtered search over a
// store of 1,000,000 records, in a directory and on versitygw, with the
// peak heap above the heap before (the handler's memory meanwhile): each
// search over segments with summaries (summary/...) and over the same
// records in segments without (full-scan/..., every segment read, as
// before summaries), side by side in one run:
//
//	go test -run '^$' -bench BenchmarkFirstPage -benchtime 3x ./console
//	go test -run '^$' -bench 'BenchmarkFirstPage/dir' -benchtime 3x ./console
func BenchmarkFirstPage(b *testing.B) {
	for _, store := range []struct {
		name      string
		noSummary bool
	}{{"summary", false}, {"full-scan", true}} {
		b.Run("dir/"+store.name, func(b *testing.B) {
			dir := b.TempDir()
			start := time.Now()
			at := writeBench(b, &fs.Writer{Directory: dir}, store.noSummary)
			b.Logf("wrote %d records into %s in %s", benchRecords, dir, time.Since(start).Round(time.Millisecond))
			benchStore(b, &fs.Reader{Directory: dir}, at)
		})
	}
	for _, store := range []struct {
		name      string
		noSummary bool
	}{{"summary", false}, {"full-scan", true}} {
		b.Run("versitygw/"+store.name, func(b *testing.B) {
			srv := s3test.VersityFor(b, nil)
			prefix := "console-bench/" + s3test.UniquePrefix(b.Name())
			start := time.Now()
			at := writeBench(b, &s3.Writer{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix}, store.noSummary)
			b.Logf("wrote %d records into versitygw in %s", benchRecords, time.Since(start).Round(time.Millisecond))
			benchStore(b, &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix}, at)
		})
	}
}

package prometheus

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/dlqdump/dlqdump"
)

func newWriter(t testing.TB, reg prom.Registerer, queue string, opts ...Option) *Writer {
	t.Helper()
	w, err := New(reg, queue, opts...)
	if err != nil {
		t.Fatalf("New(%q): %v", queue, err)
	}
	return w
}

// exercise calls every method at least once.
func exercise(w *Writer) {
	w.Dump(100)
	w.Dump(50)
	w.Flush(dlqdump.FlushSize, 2, 4096, 3*time.Millisecond)
	w.Flush(dlqdump.FlushInterval, 1, 1024, 2*time.Second)
	w.Pending(1234)
	w.Restore(1, 70)
	w.Retry()
	w.Quarantine("damaged", 3)
	w.Fail("write")
	w.Source(4, 1, 2, 90*time.Second)
	w.Expire("archive", dlqdump.RuleMaxAge, 12)
	w.JobStarted(time.Second, false)
	w.JobEnded("completed", 10)
}

func eq(t *testing.T, name string, got, want float64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func TestEachMethodMovesItsMetric(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	w := newWriter(t, reg, "orders")

	w.Dump(100)
	w.Dump(23)
	eq(t, "dumped records", testutil.ToFloat64(w.dumpedRecords), 2)
	eq(t, "dumped bytes", testutil.ToFloat64(w.dumpedBytes), 123)

	w.Flush(dlqdump.FlushSize, 10, 4096, 5*time.Millisecond)
	w.Flush(dlqdump.FlushClose, 1, 100, 20*time.Millisecond)
	w.Flush(dlqdump.FlushClose, 0, 0, 0)
	eq(t, "flushed size", testutil.ToFloat64(w.flushed.get(dlqdump.FlushSize)), 1)
	eq(t, "flushed close", testutil.ToFloat64(w.flushed.get(dlqdump.FlushClose)), 2)
	eq(t, "flushed interval", testutil.ToFloat64(w.flushed.get(dlqdump.FlushInterval)), 0)
	eq(t, "flushed bytes", testutil.ToFloat64(w.flushedBytes), 4196)

	w.Pending(500)
	eq(t, "pending", testutil.ToFloat64(w.pending), 500)
	w.Pending(0)
	eq(t, "pending", testutil.ToFloat64(w.pending), 0)

	w.Restore(1, 40)
	w.Restore(1, 2)
	eq(t, "restored records", testutil.ToFloat64(w.restoredRecords), 2)
	eq(t, "restored bytes", testutil.ToFloat64(w.restoredBytes), 42)

	w.Retry()
	w.Retry()
	w.Retry()
	eq(t, "retries", testutil.ToFloat64(w.retries), 3)

	w.Quarantine("damaged", 0)
	w.Quarantine("version", 7)
	w.Quarantine("version", 1)
	eq(t, "quarantined damaged", testutil.ToFloat64(w.quarantined.get("damaged")), 0)
	eq(t, "quarantined version", testutil.ToFloat64(w.quarantined.get("version")), 8)

	w.Fail("write")
	w.Fail("write")
	w.Fail("encode")
	eq(t, "failures write", testutil.ToFloat64(w.failures.get("write")), 2)
	eq(t, "failures encode", testutil.ToFloat64(w.failures.get("encode")), 1)

	w.Source(3, 0, 0, 1500*time.Millisecond)
	eq(t, "ready", testutil.ToFloat64(w.ready), 3)
	eq(t, "oldest", testutil.ToFloat64(w.oldest), 1.5)
	w.Source(0, 0, 0, 0)
	eq(t, "ready", testutil.ToFloat64(w.ready), 0)
	eq(t, "oldest", testutil.ToFloat64(w.oldest), 0)

	if n := testutil.CollectAndCount(w.flushDuration.(prom.Histogram)); n != 1 {
		t.Errorf("histogram series = %d, want 1", n)
	}
}

func TestExposition(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	w := newWriter(t, reg, "orders")
	exercise(w)

	const want = `
# HELP dlqdump_claimed_segments Ready segments held by a live restore claim, refreshed every check interval.
# TYPE dlqdump_claimed_segments gauge
dlqdump_claimed_segments{queue="orders"} 1
# HELP dlqdump_dumped_bytes_total Encoded bytes of the records accepted by the queue.
# TYPE dlqdump_dumped_bytes_total counter
dlqdump_dumped_bytes_total{queue="orders"} 150
# HELP dlqdump_dumped_records_total Records accepted by the queue to be dumped.
# TYPE dlqdump_dumped_records_total counter
dlqdump_dumped_records_total{queue="orders"} 2
# HELP dlqdump_expired_records_total Records removed by the retention, by area and rule.
# TYPE dlqdump_expired_records_total counter
dlqdump_expired_records_total{area="archive",queue="orders",rule="max_age"} 12
dlqdump_expired_records_total{area="archive",queue="orders",rule="max_bytes"} 0
dlqdump_expired_records_total{area="archive",queue="orders",rule="max_segments"} 0
dlqdump_expired_records_total{area="quarantine",queue="orders",rule="max_age"} 0
dlqdump_expired_records_total{area="quarantine",queue="orders",rule="max_bytes"} 0
dlqdump_expired_records_total{area="quarantine",queue="orders",rule="max_segments"} 0
dlqdump_expired_records_total{area="ready",queue="orders",rule="max_age"} 0
dlqdump_expired_records_total{area="ready",queue="orders",rule="max_bytes"} 0
dlqdump_expired_records_total{area="ready",queue="orders",rule="max_segments"} 0
# HELP dlqdump_failures_total Failed operations, by reason.
# TYPE dlqdump_failures_total counter
dlqdump_failures_total{queue="orders",reason="backpressure"} 0
dlqdump_failures_total{queue="orders",reason="closed"} 0
dlqdump_failures_total{queue="orders",reason="corrupt"} 0
dlqdump_failures_total{queue="orders",reason="encode"} 0
dlqdump_failures_total{queue="orders",reason="gone"} 0
dlqdump_failures_total{queue="orders",reason="moved_away"} 0
dlqdump_failures_total{queue="orders",reason="no_key"} 0
dlqdump_failures_total{queue="orders",reason="not_a_copy"} 0
dlqdump_failures_total{queue="orders",reason="not_durable"} 0
dlqdump_failures_total{queue="orders",reason="recover"} 0
dlqdump_failures_total{queue="orders",reason="shutdown"} 0
dlqdump_failures_total{queue="orders",reason="too_large"} 0
dlqdump_failures_total{queue="orders",reason="unauthenticated_progress"} 0
dlqdump_failures_total{queue="orders",reason="version_deleted"} 0
dlqdump_failures_total{queue="orders",reason="write"} 1
# HELP dlqdump_flush_duration_seconds Time taken to seal and publish a segment.
# TYPE dlqdump_flush_duration_seconds histogram
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.001"} 0
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.0025"} 0
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.005"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.01"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.025"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.05"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.1"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.25"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.5"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="1"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="2.5"} 2
dlqdump_flush_duration_seconds_bucket{queue="orders",le="5"} 2
dlqdump_flush_duration_seconds_bucket{queue="orders",le="10"} 2
dlqdump_flush_duration_seconds_bucket{queue="orders",le="30"} 2
dlqdump_flush_duration_seconds_bucket{queue="orders",le="+Inf"} 2
dlqdump_flush_duration_seconds_sum{queue="orders"} 2.003
dlqdump_flush_duration_seconds_count{queue="orders"} 2
# HELP dlqdump_flushed_bytes_total Stored bytes of the published segments.
# TYPE dlqdump_flushed_bytes_total counter
dlqdump_flushed_bytes_total{queue="orders"} 5120
# HELP dlqdump_flushed_segments_total Segments published, by flush reason.
# TYPE dlqdump_flushed_segments_total counter
dlqdump_flushed_segments_total{queue="orders",reason="close"} 0
dlqdump_flushed_segments_total{queue="orders",reason="flush"} 0
dlqdump_flushed_segments_total{queue="orders",reason="interval"} 1
dlqdump_flushed_segments_total{queue="orders",reason="recover"} 0
dlqdump_flushed_segments_total{queue="orders",reason="size"} 1
# HELP dlqdump_oldest_ready_record_age_seconds Age of the oldest ready record, refreshed every check interval.
# TYPE dlqdump_oldest_ready_record_age_seconds gauge
dlqdump_oldest_ready_record_age_seconds{queue="orders"} 90
# HELP dlqdump_pending_bytes Bytes accepted by the queue and not yet written to a segment.
# TYPE dlqdump_pending_bytes gauge
dlqdump_pending_bytes{queue="orders"} 1234
# HELP dlqdump_quarantined_records_total Records moved to quarantine, by reason.
# TYPE dlqdump_quarantined_records_total counter
dlqdump_quarantined_records_total{queue="orders",reason="damaged"} 3
dlqdump_quarantined_records_total{queue="orders",reason="decode"} 0
dlqdump_quarantined_records_total{queue="orders",reason="discarded"} 0
dlqdump_quarantined_records_total{queue="orders",reason="progress"} 0
dlqdump_quarantined_records_total{queue="orders",reason="refused"} 0
dlqdump_quarantined_records_total{queue="orders",reason="replays"} 0
dlqdump_quarantined_records_total{queue="orders",reason="too_large"} 0
dlqdump_quarantined_records_total{queue="orders",reason="transform"} 0
dlqdump_quarantined_records_total{queue="orders",reason="unencrypted"} 0
dlqdump_quarantined_records_total{queue="orders",reason="version"} 0
# HELP dlqdump_quarantined_segments Segments in quarantine, refreshed every check interval.
# TYPE dlqdump_quarantined_segments gauge
dlqdump_quarantined_segments{queue="orders"} 2
# HELP dlqdump_ready_segments Segments ready to be restored, refreshed every check interval.
# TYPE dlqdump_ready_segments gauge
dlqdump_ready_segments{queue="orders"} 4
# HELP dlqdump_restored_bytes_total Payload bytes of the records delivered to the destination.
# TYPE dlqdump_restored_bytes_total counter
dlqdump_restored_bytes_total{queue="orders"} 70
# HELP dlqdump_restored_records_total Records delivered to the destination.
# TYPE dlqdump_restored_records_total counter
dlqdump_restored_records_total{queue="orders"} 1
# HELP dlqdump_retries_total Deliveries the destination refused that will be retried.
# TYPE dlqdump_retries_total counter
dlqdump_retries_total{queue="orders"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), allMetrics[:len(allMetrics)-len(jobMetrics)]...); err != nil {
		t.Fatal(err)
	}
	// 20 series, a series for each other failure (14), quarantine (9)
	// and retention (8) reason from the start, and the jobs': running,
	// started by how (2), ended by state (5), records, the start delay.
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 20+14+9+8+10 {
		t.Fatalf("series = %d, %v; want 61", n, err)
	}
}

// allMetrics lists every metric name the Writer exports.
var allMetrics = []string{
	MetricDumpedRecords, MetricDumpedBytes, MetricFlushedSegments,
	MetricFlushedBytes, MetricFlushDuration, MetricPendingBytes,
	MetricRestoredRecords, MetricRestoredBytes, MetricRetries,
	MetricQuarantined, MetricFailures, MetricReadySegments,
	MetricOldestReadyRecord, MetricClaimedSegments, MetricQuarSegments, MetricExpired,
	MetricJobsRunning, MetricJobsStarted, MetricJobsEnded, MetricJobRecords, MetricJobStartDelay,
}

// jobMetrics are the restore jobs' metrics, last in allMetrics.
var jobMetrics = allMetrics[len(allMetrics)-5:]

// A runner's job metrics: running jobs, starts by how, ends by state, the
// records delivered while held, and the start delay of first starts only.
func TestJobMetrics(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	w := newWriter(t, reg, "orders")
	w.JobStarted(300*time.Millisecond, false)
	w.JobStarted(0, true)
	eq(t, "running", testutil.ToFloat64(w.jobsRunning), 2)
	w.JobEnded("paused", 40)
	w.JobEnded("completed", 60)
	eq(t, "running", testutil.ToFloat64(w.jobsRunning), 0)
	eq(t, "taken over", testutil.ToFloat64(w.jobsStarted.WithLabelValues("taken_over")), 1)
	eq(t, "completed", testutil.ToFloat64(w.jobsEnded.WithLabelValues("completed")), 1)
	eq(t, "failed", testutil.ToFloat64(w.jobsEnded.WithLabelValues("failed")), 0)
	eq(t, "records", testutil.ToFloat64(w.jobRecords), 100)
	if n := testutil.CollectAndCount(w.jobLateness.(prom.Histogram)); n != 1 {
		t.Errorf("start delay series = %d", n)
	}
}

func TestPromlint(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	exercise(newWriter(t, reg, "orders"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != len(allMetrics) {
		t.Fatalf("gathered %d families, want %d", len(mfs), len(allMetrics))
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestScrapeOverHTTP(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	exercise(newWriter(t, reg, "orders"))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	for _, name := range allMetrics {
		if !strings.Contains(body, "\n"+name) && !strings.HasPrefix(body, name) {
			t.Errorf("scrape lacks %s", name)
		}
	}
	for _, s := range []string{
		`dlqdump_dumped_records_total{queue="orders"} 2`,
		`dlqdump_flushed_segments_total{queue="orders",reason="size"} 1`,
		`dlqdump_flushed_segments_total{queue="orders",reason="recover"} 0`,
		`dlqdump_quarantined_records_total{queue="orders",reason="damaged"} 3`,
		`dlqdump_failures_total{queue="orders",reason="write"} 1`,
		`dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.005"} 1`,
		`dlqdump_oldest_ready_record_age_seconds{queue="orders"} 90`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("scrape lacks %s", s)
		}
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", body)
	}

	// The same exposition, checked through testutil's scraper.
	const want = `
# HELP dlqdump_retries_total Deliveries the destination refused that will be retried.
# TYPE dlqdump_retries_total counter
dlqdump_retries_total{queue="orders"} 1
`
	if err := testutil.ScrapeAndCompare(srv.URL+"/metrics", strings.NewReader(want), MetricRetries); err != nil {
		t.Error(err)
	}
}

func TestSameQueueTwiceSharesSeries(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	a := newWriter(t, reg, "orders")
	b := newWriter(t, reg, "orders")
	a.Dump(10)
	b.Dump(5)
	a.Fail("write")
	b.Fail("write")
	b.Flush(dlqdump.FlushManual, 1, 10, time.Millisecond)
	eq(t, "a dumped records", testutil.ToFloat64(a.dumpedRecords), 2)
	eq(t, "b dumped bytes", testutil.ToFloat64(b.dumpedBytes), 15)
	eq(t, "a failures", testutil.ToFloat64(a.failures.get("write")), 2)
	eq(t, "a flushed", testutil.ToFloat64(a.flushed.get(dlqdump.FlushManual)), 1)
	if n, err := testutil.GatherAndCount(reg, MetricDumpedRecords); err != nil || n != 1 {
		t.Fatalf("dumped series = %d, %v; want 1", n, err)
	}
}

func TestTwoQueues(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	a := newWriter(t, reg, "orders")
	b := newWriter(t, reg, "payments")
	a.Dump(10)
	b.Dump(1)
	b.Dump(1)
	a.Fail("write")
	b.Fail("sync")

	const want = `
# HELP dlqdump_dumped_records_total Records accepted by the queue to be dumped.
# TYPE dlqdump_dumped_records_total counter
dlqdump_dumped_records_total{queue="orders"} 1
dlqdump_dumped_records_total{queue="payments"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricDumpedRecords); err != nil {
		t.Fatal(err)
	}
	eq(t, "orders write failures", testutil.ToFloat64(a.failures.get("write")), 1)
	eq(t, "payments write failures", testutil.ToFloat64(b.failures.get("write")), 0)
	eq(t, "payments sync failures", testutil.ToFloat64(b.failures.get("sync")), 1)
	if n, err := testutil.GatherAndCount(reg, MetricFailures); err != nil || n != 2*len(dlqdump.FailReasons)+1 {
		t.Fatalf("failure series = %d, %v; want %d", n, err, 2*len(dlqdump.FailReasons)+1)
	}
	if n, err := testutil.GatherAndCount(reg, MetricFlushedSegments); err != nil || n != 2*len(flushReasons) {
		t.Fatalf("flushed series = %d, %v; want %d", n, err, 2*len(flushReasons))
	}
}

func TestConstLabels(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	w := newWriter(t, reg, "orders", WithConstLabels(prom.Labels{"region": "eu", LabelQueue: "ignored"}))
	w.Retry()
	const want = `
# HELP dlqdump_retries_total Deliveries the destination refused that will be retried.
# TYPE dlqdump_retries_total counter
dlqdump_retries_total{queue="orders",region="eu"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricRetries); err != nil {
		t.Fatal(err)
	}
}

func TestBuckets(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	w := newWriter(t, reg, "orders", WithBuckets([]float64{0.1, 1}))
	w.Flush(dlqdump.FlushSize, 1, 1, 500*time.Millisecond)
	const want = `
# HELP dlqdump_flush_duration_seconds Time taken to seal and publish a segment.
# TYPE dlqdump_flush_duration_seconds histogram
dlqdump_flush_duration_seconds_bucket{queue="orders",le="0.1"} 0
dlqdump_flush_duration_seconds_bucket{queue="orders",le="1"} 1
dlqdump_flush_duration_seconds_bucket{queue="orders",le="+Inf"} 1
dlqdump_flush_duration_seconds_sum{queue="orders"} 0.5
dlqdump_flush_duration_seconds_count{queue="orders"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricFlushDuration); err != nil {
		t.Fatal(err)
	}
}

func TestWrappedRegisterer(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	wrapped := prom.WrapRegistererWith(prom.Labels{"app": "x"}, reg)
	a := newWriter(t, wrapped, "orders")
	b := newWriter(t, wrapped, "orders")
	a.Retry()
	b.Retry()
	const want = `
# HELP dlqdump_retries_total Deliveries the destination refused that will be retried.
# TYPE dlqdump_retries_total counter
dlqdump_retries_total{app="x",queue="orders"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricRetries); err != nil {
		t.Fatal(err)
	}
}

func TestConflictIsAnErrorAndRollsBack(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	// Same name, different help and labels: not the same collector.
	other := prom.NewCounter(prom.CounterOpts{Name: MetricRetries, Help: "Someone else's."})
	reg.MustRegister(other)

	w, err := New(reg, "orders")
	if err == nil {
		t.Fatal("New succeeded despite a conflicting collector")
	}
	if w != nil {
		t.Error("New returned a Writer with its error")
	}
	// Nothing of the failed New stays registered.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != MetricRetries || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("registry holds %d families after a failed New", len(mfs))
	}
}

func TestExistingOfAnotherTypeIsAnError(t *testing.T) {
	reg := prom.NewRegistry()
	opts := prom.Opts{Name: "x_things", Help: "Things.", ConstLabels: prom.Labels{LabelQueue: "q"}}
	reg.MustRegister(prom.NewCounter(prom.CounterOpts(opts)))

	r := registrar{reg: reg}
	register(&r, prom.NewGauge(prom.GaugeOpts(opts)))
	var are prom.AlreadyRegisteredError
	if r.err == nil || !errors.As(r.err, &are) {
		t.Fatalf("err = %v, want an AlreadyRegisteredError about the type", r.err)
	}
	// Later registrations are skipped after the first error.
	g := prom.NewGauge(prom.GaugeOpts{Name: "y", Help: "Y."})
	register(&r, g)
	if reg.Unregister(g) {
		t.Error("registered after an error")
	}
}

func TestBadArguments(t *testing.T) {
	if _, err := New(nil, "orders"); err == nil {
		t.Error("nil Registerer accepted")
	}
	if _, err := New(prom.NewRegistry(), ""); err == nil {
		t.Error("empty queue name accepted")
	}
	if _, err := New(prom.NewRegistry(), "orders", WithConstLabels(prom.Labels{"__reserved": "x"})); err == nil {
		t.Error("invalid label name accepted")
	}
}

func TestConcurrentUse(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	w := newWriter(t, reg, "orders")
	const goroutines, n = 8, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reasons := []string{"write", "sync", "commit", "encode"}
			for i := range n {
				w.Dump(1)
				w.Restore(1, 2)
				w.Fail(reasons[(g+i)%len(reasons)])
				w.Quarantine(reasons[i%len(reasons)], 1)
				w.Pending(int64(i))
			}
		}()
	}
	wg.Wait()
	eq(t, "dumped records", testutil.ToFloat64(w.dumpedRecords), goroutines*n)
	eq(t, "restored bytes", testutil.ToFloat64(w.restoredBytes), 2*goroutines*n)
	var fails float64
	for _, r := range []string{"write", "sync", "commit", "encode"} {
		fails += testutil.ToFloat64(w.failures.get(r))
	}
	eq(t, "failures", fails, goroutines*n)
}

func TestHotPathAllocs(t *testing.T) {
	w := newWriter(t, prom.NewRegistry(), "orders")
	w.Fail("write")
	w.Quarantine("damaged", 1)
	for name, f := range map[string]func(){
		"Dump":       func() { w.Dump(128) },
		"Restore":    func() { w.Restore(1, 128) },
		"Retry":      func() { w.Retry() },
		"Pending":    func() { w.Pending(1 << 20) },
		"Flush":      func() { w.Flush(dlqdump.FlushSize, 10, 4096, time.Millisecond) },
		"Fail":       func() { w.Fail("write") },
		"Quarantine": func() { w.Quarantine("damaged", 1) },
		"Source":     func() { w.Source(3, 0, 0, time.Second) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
}

func BenchmarkDump(b *testing.B) {
	w := newWriter(b, prom.NewRegistry(), "orders")
	b.ReportAllocs()
	for b.Loop() {
		w.Dump(256)
	}
}

func BenchmarkDumpParallel(b *testing.B) {
	w := newWriter(b, prom.NewRegistry(), "orders")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Dump(256)
		}
	})
}

func BenchmarkRestore(b *testing.B) {
	w := newWriter(b, prom.NewRegistry(), "orders")
	b.ReportAllocs()
	for b.Loop() {
		w.Restore(1, 256)
	}
}

func BenchmarkRestoreParallel(b *testing.B) {
	w := newWriter(b, prom.NewRegistry(), "orders")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Restore(1, 256)
		}
	})
}

func BenchmarkFail(b *testing.B) {
	w := newWriter(b, prom.NewRegistry(), "orders")
	w.Fail("write")
	b.ReportAllocs()
	for b.Loop() {
		w.Fail("write")
	}
}

func BenchmarkFlush(b *testing.B) {
	w := newWriter(b, prom.NewRegistry(), "orders")
	b.ReportAllocs()
	for b.Loop() {
		w.Flush(dlqdump.FlushSize, 100, 1<<20, 12*time.Millisecond)
	}
}

// Package prometheus provides a dlqdump.MetricsWriter that counts the events
// of a Queue and a Restorer in Prometheus collectors.
//
// New registers the collectors on the prometheus.Registerer it is given (never
// on the global registry) with the queue name as the constant label "queue",
// so several queues can share one registry:
//
//	import dlqprom "github.com/dlqdump/dlqdump/metrics/prometheus"
//
//	reg := prometheus.NewRegistry()
//	mw, err := dlqprom.New(reg, "orders")
//	if err != nil { ... }
//	q, err := dlqdump.NewQueue(&dlqdump.Config{..., MetricsWriter: mw})
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The metrics:
//
//	dlqdump_dumped_records_total                counter   records accepted by Queue.Enqueue
//	dlqdump_dumped_bytes_total                  counter   encoded bytes of those records
//	dlqdump_flushed_segments_total{reason}      counter   segments published, by flush reason
//	dlqdump_flushed_bytes_total                 counter   stored bytes of those segments
//	dlqdump_flush_duration_seconds              histogram time to seal and publish a segment
//	dlqdump_pending_bytes                       gauge     bytes accepted but not yet written
//	dlqdump_restored_records_total              counter   records delivered to the destination
//	dlqdump_restored_bytes_total                counter   payload bytes of those records
//	dlqdump_retries_total                       counter   deliveries refused and to be retried
//	dlqdump_quarantined_records_total{reason}   counter   records moved aside, by reason
//	dlqdump_failures_total{reason}              counter   failed operations, by reason (closed, encode,
//	                                                      too_large, backpressure: Enqueue calls refused)
//	dlqdump_expired_records_total{area,rule}    counter   records removed by the retention
//	dlqdump_ready_segments                      gauge     segments ready to restore
//	dlqdump_claimed_segments                    gauge     ready segments held by a live claim
//	dlqdump_quarantined_segments                gauge     segments in quarantine
//	dlqdump_oldest_ready_record_age_seconds     gauge     age of the oldest ready record
//	dlqdump_dumped_error_groups_total{group}    counter   records dumped by error signature: the first
//	                                                      n groups and (other), with WithErrorGroups(n)
//
// Dump is called once per record and Restore once per block; they touch only pre-bound
// counters and allocate nothing. The labelled counters keep their children
// for reasons already seen in a copy-on-write map, so a repeated reason costs
// a map lookup and no allocation either. The series of every reason and area
// dlqdump passes exist from the start, at zero (dlqdump.Flush*,
// dlqdump.FailReasons, dlqdump.QuarantineReasons, the three areas and
// dlqdump.Rule*, the jobs' states), so that an alert on a counter's
// increase sees its first event.
//
// The reasons are short stable strings chosen by dlqdump; each distinct one
// becomes a series, so a custom component calling the Writer must not pass
// unbounded values.
package prometheus

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/dlqdump/dlqdump"
)

// Names of the metrics the Writer exports.
const (
	MetricDumpedRecords     = "dlqdump_dumped_records_total"
	MetricDumpedBytes       = "dlqdump_dumped_bytes_total"
	MetricFlushedSegments   = "dlqdump_flushed_segments_total"
	MetricFlushedBytes      = "dlqdump_flushed_bytes_total"
	MetricFlushDuration     = "dlqdump_flush_duration_seconds"
	MetricPendingBytes      = "dlqdump_pending_bytes"
	MetricRestoredRecords   = "dlqdump_restored_records_total"
	MetricRestoredBytes     = "dlqdump_restored_bytes_total"
	MetricRetries           = "dlqdump_retries_total"
	MetricQuarantined       = "dlqdump_quarantined_records_total"
	MetricFailures          = "dlqdump_failures_total"
	MetricExpired           = "dlqdump_expired_records_total"
	MetricReadySegments     = "dlqdump_ready_segments"
	MetricClaimedSegments   = "dlqdump_claimed_segments"
	MetricQuarSegments      = "dlqdump_quarantined_segments"
	MetricOldestReadyRecord = "dlqdump_oldest_ready_record_age_seconds"
)

// Label names used by the Writer.
const (
	// LabelQueue is the constant label holding the queue name given to New.
	LabelQueue = "queue"
	// LabelReason is the variable label of the labelled counters.
	LabelReason = "reason"
	// LabelArea and LabelRule label dlqdump_expired_records_total.
	LabelArea = "area"
	LabelRule = "rule"
)

// DefaultBuckets are the upper bounds, in seconds, of
// dlqdump_flush_duration_seconds: from 1 ms to 30 s.
var DefaultBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// flushReasons are the reasons whose flushed-segment series are created
// up front.
var flushReasons = []string{
	dlqdump.FlushSize,
	dlqdump.FlushInterval,
	dlqdump.FlushManual,
	dlqdump.FlushClose,
	dlqdump.FlushRecover,
}

// Writer is a dlqdump.MetricsWriter that updates Prometheus collectors. It is
// safe for concurrent use. Create one with New.
type Writer struct {
	dumpedRecords   prom.Counter
	dumpedBytes     prom.Counter
	flushedBytes    prom.Counter
	restoredRecords prom.Counter
	restoredBytes   prom.Counter
	retries         prom.Counter

	flushDuration prom.Observer

	pending prom.Gauge
	ready   prom.Gauge
	claimed prom.Gauge
	quar    prom.Gauge
	oldest  prom.Gauge

	flushed     reasonCounters
	quarantined reasonCounters
	failures    reasonCounters
	expired     *prom.CounterVec // by area and rule: few series, rarely touched

	jobsRunning prom.Gauge
	jobsStarted *prom.CounterVec // by how: started, taken_over
	jobsEnded   *prom.CounterVec // by state
	jobRecords  prom.Counter
	jobLateness prom.Observer

	errGroups *errorGroups // nil: WithErrorGroups(0)
}

var _ dlqdump.ErrorMetricsWriter = (*Writer)(nil)

// Option configures New.
type Option func(*options)

type options struct {
	buckets     []float64
	constLabels prom.Labels
	errorGroups int
}

// WithBuckets sets the buckets of dlqdump_flush_duration_seconds, in
// seconds. Default DefaultBuckets. When the collectors are already registered
// by an earlier New, the earlier buckets stay.
func WithBuckets(b []float64) Option {
	return func(o *options) { o.buckets = b }
}

// WithConstLabels adds constant labels to every metric, besides "queue"
// (which they cannot override).
func WithConstLabels(l prom.Labels) Option {
	return func(o *options) { o.constLabels = l }
}

// New creates a Writer for the queue named queue and registers its
// collectors on reg, with queue as the value of the constant label "queue".
//
// When reg already holds the same collectors (an earlier New with the same
// registry and queue name), New reuses them, so both Writers update the same
// series. Any other registration failure, such as a metric of the same name
// with a different help or label set registered by someone else, is
// returned as an error; the collectors this call had registered are then
// unregistered again.
func New(reg prom.Registerer, queue string, opts ...Option) (*Writer, error) {
	if reg == nil {
		return nil, errors.New("dlqdump/metrics/prometheus: nil Registerer")
	}
	if queue == "" {
		return nil, errors.New("dlqdump/metrics/prometheus: empty queue name")
	}
	o := options{buckets: DefaultBuckets}
	for _, fn := range opts {
		if fn != nil {
			fn(&o)
		}
	}
	cl := prom.Labels{}
	for k, v := range o.constLabels {
		cl[k] = v
	}
	cl[LabelQueue] = queue

	r := registrar{reg: reg}
	counter := func(name, help string) prom.Counter {
		return register(&r, prom.NewCounter(prom.CounterOpts{Name: name, Help: help, ConstLabels: cl}))
	}
	counterVec := func(name, help string) *prom.CounterVec {
		return register(&r, prom.NewCounterVec(prom.CounterOpts{Name: name, Help: help, ConstLabels: cl}, []string{LabelReason}))
	}
	gauge := func(name, help string) prom.Gauge {
		return register(&r, prom.NewGauge(prom.GaugeOpts{Name: name, Help: help, ConstLabels: cl}))
	}

	w := &Writer{
		dumpedRecords: counter(MetricDumpedRecords,
			"Records accepted by the queue to be dumped."),
		dumpedBytes: counter(MetricDumpedBytes,
			"Encoded bytes of the records accepted by the queue."),
		flushedBytes: counter(MetricFlushedBytes,
			"Stored bytes of the published segments."),
		restoredRecords: counter(MetricRestoredRecords,
			"Records delivered to the destination."),
		restoredBytes: counter(MetricRestoredBytes,
			"Payload bytes of the records delivered to the destination."),
		retries: counter(MetricRetries,
			"Deliveries the destination refused that will be retried."),
		flushDuration: register(&r, prom.NewHistogram(prom.HistogramOpts{
			Name:        MetricFlushDuration,
			Help:        "Time taken to seal and publish a segment.",
			ConstLabels: cl,
			Buckets:     o.buckets,
		})),
		pending: gauge(MetricPendingBytes,
			"Bytes accepted by the queue and not yet written to a segment."),
		ready: gauge(MetricReadySegments,
			"Segments ready to be restored, refreshed every check interval."),
		claimed: gauge(MetricClaimedSegments,
			"Ready segments held by a live restore claim, refreshed every check interval."),
		quar: gauge(MetricQuarSegments,
			"Segments in quarantine, refreshed every check interval."),
		oldest: gauge(MetricOldestReadyRecord,
			"Age of the oldest ready record, refreshed every check interval."),
	}
	w.flushed.init(counterVec(MetricFlushedSegments,
		"Segments published, by flush reason."), flushReasons)
	w.quarantined.init(counterVec(MetricQuarantined,
		"Records moved to quarantine, by reason."), dlqdump.QuarantineReasons)
	w.failures.init(counterVec(MetricFailures,
		"Failed operations, by reason."), dlqdump.FailReasons)
	w.expired = register(&r, prom.NewCounterVec(prom.CounterOpts{Name: MetricExpired,
		Help: "Records removed by the retention, by area and rule.", ConstLabels: cl}, []string{LabelArea, LabelRule}))
	for _, area := range []string{"ready", "quarantine", "archive"} {
		for _, rule := range []string{dlqdump.RuleMaxAge, dlqdump.RuleMaxSegments, dlqdump.RuleMaxBytes} {
			w.expired.WithLabelValues(area, rule)
		}
	}
	w.jobsRunning = gauge(MetricJobsRunning, "Restore jobs running on this runner.")
	w.jobsStarted = register(&r, prom.NewCounterVec(prom.CounterOpts{Name: MetricJobsStarted,
		Help: "Restore jobs started (how: started, or taken_over from a runner that stopped).", ConstLabels: cl}, []string{LabelHow}))
	w.jobsEnded = register(&r, prom.NewCounterVec(prom.CounterOpts{Name: MetricJobsEnded,
		Help: "Restore jobs let go by a runner, by the state it left them in.", ConstLabels: cl}, []string{LabelState}))
	w.jobRecords = counter(MetricJobRecords, "Records restore jobs delivered, counted when a runner lets a job go.")
	w.jobLateness = register(&r, prom.NewHistogram(prom.HistogramOpts{Name: MetricJobStartDelay,
		Help: "How late after it was due a restore job first started.", ConstLabels: cl, Buckets: JobDelayBuckets}))
	for _, how := range []string{"started", "taken_over"} {
		w.jobsStarted.WithLabelValues(how)
	}
	for _, st := range []string{"pending", "paused", "completed", "failed", "cancelled"} {
		w.jobsEnded.WithLabelValues(st)
	}
	if o.errorGroups > 0 {
		w.errGroups = newErrorGroups(register(&r, prom.NewCounterVec(prom.CounterOpts{Name: MetricErrorGroups,
			Help: "Records dumped, by the signature of their error header (at most a bounded number of groups; the others are (other)).", ConstLabels: cl}, []string{LabelGroup})), o.errorGroups)
	}

	if r.err != nil {
		for _, c := range r.added {
			reg.Unregister(c)
		}
		return nil, r.err
	}
	return w, nil
}

// registrar registers collectors, keeping the first error and the
// collectors it added so that they can be taken back.
type registrar struct {
	reg   prom.Registerer
	added []prom.Collector
	err   error
}

// register registers c on r.reg and returns it, or the equal collector
// already registered there. After a failure it returns c unregistered and
// records the error; later calls then do nothing.
func register[C prom.Collector](r *registrar, c C) C {
	if r.err != nil {
		return c
	}
	err := r.reg.Register(c)
	if err == nil {
		r.added = append(r.added, c)
		return c
	}
	var are prom.AlreadyRegisteredError
	if errors.As(err, &are) {
		if ex, ok := are.ExistingCollector.(C); ok {
			return ex
		}
		err = fmt.Errorf("collector already registered with a different type %T: %w", are.ExistingCollector, err)
	}
	r.err = fmt.Errorf("dlqdump/metrics/prometheus: register: %w", err)
	return c
}

// reasonCounters caches the children of a CounterVec by reason. Reads load
// an immutable map without locking or allocating; a new reason copies it.
type reasonCounters struct {
	vec *prom.CounterVec
	m   atomic.Pointer[map[string]prom.Counter]
	mu  sync.Mutex
}

func (rc *reasonCounters) init(vec *prom.CounterVec, reasons []string) {
	rc.vec = vec
	m := make(map[string]prom.Counter, len(reasons))
	for _, r := range reasons {
		m[r] = vec.WithLabelValues(r)
	}
	rc.m.Store(&m)
}

// get returns the child for reason, creating it on first use.
func (rc *reasonCounters) get(reason string) prom.Counter {
	if c, ok := (*rc.m.Load())[reason]; ok {
		return c
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	old := *rc.m.Load()
	if c, ok := old[reason]; ok {
		return c
	}
	c := rc.vec.WithLabelValues(reason)
	m := make(map[string]prom.Counter, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[reason] = c
	rc.m.Store(&m)
	return c
}

// Dump counts a record accepted by Queue.Enqueue and its encoded bytes.
func (w *Writer) Dump(size int) {
	w.dumpedRecords.Inc()
	w.dumpedBytes.Add(float64(size))
}

// Flush counts a published segment under its reason, adds its stored bytes
// and observes how long sealing and publishing took.
func (w *Writer) Flush(reason string, records, size int, took time.Duration) {
	w.flushed.get(reason).Inc()
	w.flushedBytes.Add(float64(size))
	w.flushDuration.Observe(took.Seconds())
}

// Pending sets dlqdump_pending_bytes.
func (w *Writer) Pending(bytes int64) {
	w.pending.Set(float64(bytes))
}

// Restore counts records delivered to the destination and their payload
// bytes.
func (w *Writer) Restore(records, bytes int) {
	w.restoredRecords.Add(float64(records))
	w.restoredBytes.Add(float64(bytes))
}

// Retry counts a delivery the destination refused.
func (w *Writer) Retry() {
	w.retries.Inc()
}

// Quarantine adds records to dlqdump_quarantined_records_total under reason.
func (w *Writer) Quarantine(reason string, records int) {
	w.quarantined.get(reason).Add(float64(records))
}

// Expire adds the records of an expired segment to
// dlqdump_expired_records_total under its area and rule.
func (w *Writer) Expire(area, rule string, records int) {
	w.expired.WithLabelValues(area, rule).Add(float64(records))
}

// Fail counts a failed operation under reason.
func (w *Writer) Fail(reason string) {
	w.failures.get(reason).Inc()
}

// Source sets dlqdump_ready_segments, dlqdump_claimed_segments,
// dlqdump_quarantined_segments and dlqdump_oldest_ready_record_age_seconds.
func (w *Writer) Source(ready, claimed, quarantined int, oldest time.Duration) {
	w.ready.Set(float64(ready))
	w.claimed.Set(float64(claimed))
	w.quar.Set(float64(quarantined))
	w.oldest.Set(oldest.Seconds())
}

// Restore jobs' metrics (the jobs.Metrics a jobs.Runner takes).
const (
	MetricJobsRunning   = "dlqdump_jobs_running"
	MetricJobsStarted   = "dlqdump_jobs_started_total"
	MetricJobsEnded     = "dlqdump_jobs_ended_total"
	MetricJobRecords    = "dlqdump_job_delivered_records_total"
	MetricJobStartDelay = "dlqdump_job_start_delay_seconds"
	// LabelHow says how a job started; LabelState the state it was left
	// in.
	LabelHow   = "how"
	LabelState = "state"
)

// JobDelayBuckets are the buckets of dlqdump_job_start_delay_seconds.
var JobDelayBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600}

// JobStarted counts a restore job started (jobs.Metrics).
func (w *Writer) JobStarted(late time.Duration, takenOver bool) {
	w.jobsRunning.Inc()
	if takenOver {
		w.jobsStarted.WithLabelValues("taken_over").Inc()
		return
	}
	w.jobsStarted.WithLabelValues("started").Inc()
	w.jobLateness.Observe(late.Seconds())
}

// JobEnded counts a restore job a runner let go (jobs.Metrics).
func (w *Writer) JobEnded(state string, delivered uint64) {
	w.jobsRunning.Dec()
	w.jobsEnded.WithLabelValues(state).Inc()
	w.jobRecords.Add(float64(delivered))
}

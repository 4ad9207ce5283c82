package dlqdump

import "time"

// MetricsWriter receives the events of a Queue and a Restorer. Implementations
// must be safe for concurrent use and fast: they are called on hot paths.
// Ready-made writers are in metrics/log and metrics/prometheus.
type MetricsWriter interface {
	// Dump is called for each record accepted by Queue.Enqueue, with the
	// size of its encoded body.
	Dump(size int)
	// Flush is called when a segment is published: why (FlushSize,
	// FlushInterval, ...), how many records and stored bytes it holds, and
	// how long sealing and publishing took.
	Flush(reason string, records, size int, took time.Duration)
	// Pending reports the bytes accepted but not yet written, after each
	// change made by the writer loop.
	Pending(bytes int64)
	// Restore is called after each block of records delivered to the
	// destination, with the number of records and their payload bytes.
	Restore(records, bytes int)
	// Retry is called when the destination refused a record and it will be
	// offered again.
	Retry()
	// Quarantine is called when records are moved aside, with the reason.
	Quarantine(reason string, records int)
	// Expire is called when a segment is removed by the retention
	// (Config.Retention): its area ("ready", "quarantine", "archive"), the
	// rule (RuleMaxAge, ...) and the records it held that are gone.
	Expire(area, rule string, records int)
	// Fail is called when an operation fails, with a short stable reason
	// such as "write", "sync", "commit"; an Enqueue that stores nothing is
	// one with the reason of its QueueStats.Refused count: "closed",
	// "encode", "too_large" or "backpressure".
	Fail(reason string)
	// Source reports the state of the Restorer's store, after each pass
	// and every CheckInterval once started: how many segments are ready,
	// how many of those are claimed, how many are quarantined, and the age
	// of the oldest ready record.
	Source(ready, claimed, quarantined int, oldest time.Duration)
}

// ErrorMetricsWriter is a MetricsWriter that also counts the records a
// Queue dumps by their error (metrics/prometheus's Writer, by error group).
// A Queue whose MetricsWriter implements it calls DumpError with the
// HeaderError value of every record it dumps that has one, from the
// goroutines that compress its blocks (when a block is cut, not on the
// callers' goroutines).
type ErrorMetricsWriter interface {
	MetricsWriter
	DumpError(msg string)
}

// Flush reasons passed to MetricsWriter.Flush.
const (
	FlushSize     = "size"     // the segment reached Config.Capacity
	FlushInterval = "interval" // Config.FlushInterval passed since its first record
	FlushManual   = "flush"    // Queue.Flush
	FlushClose    = "close"    // Queue.Close
	FlushRecover  = "recover"  // a segment left open by a crash was sealed
)

// NopMetrics is a MetricsWriter that does nothing; the default.
type NopMetrics struct{}

// Dump does nothing.
func (NopMetrics) Dump(int) {}

// Flush does nothing.
func (NopMetrics) Flush(string, int, int, time.Duration) {}

// Pending does nothing.
func (NopMetrics) Pending(int64) {}

// Restore does nothing.
func (NopMetrics) Restore(int, int) {}

// Retry does nothing.
func (NopMetrics) Retry() {}

// Quarantine does nothing.
func (NopMetrics) Quarantine(string, int) {}

// Expire does nothing.
func (NopMetrics) Expire(string, string, int) {}

// Fail does nothing.
func (NopMetrics) Fail(string) {}

// Source does nothing.
func (NopMetrics) Source(int, int, int, time.Duration) {}

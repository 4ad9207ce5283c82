// Package log provides a dlqdump.MetricsWriter that reports the events of a
// Queue and a Restorer through a *slog.Logger.
//
// Levels, by default:
//
//   - Debug: the per-record events Dump and Retry, Restore (per block), and the frequent
//     state reports Pending and Source;
//   - Info: Flush and Quarantine;
//   - Warn: Fail.
//
// Only sizes, counts, durations and the short stable reasons are logged;
// payloads, headers and keys never reach the Writer, so they cannot leak.
//
// The per-record events are called on hot paths, possibly millions of times a
// second. Each one asks the logger's handler whether its level is enabled
// before building a record, so with Debug disabled an event costs one
// Handler.Enabled call and allocates nothing.
package log

import (
	"context"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump"
)

// Messages of the records the Writer logs, one per event. They are stable and
// may be matched on.
const (
	MsgDump       = "dlqdump record dumped"
	MsgFlush      = "dlqdump segment flushed"
	MsgPending    = "dlqdump pending bytes"
	MsgRestore    = "dlqdump record restored"
	MsgRetry      = "dlqdump record retried"
	MsgQuarantine = "dlqdump records quarantined"
	MsgFail       = "dlqdump operation failed"
	MsgSource     = "dlqdump source state"
	MsgExpire     = "dlqdump records expired"
)

// Attribute keys of the records the Writer logs.
const (
	KeySize        = "size"        // bytes of one record, or of a flushed segment
	KeyReason      = "reason"      // flush, quarantine or failure reason
	KeyRecords     = "records"     // number of records
	KeyTook        = "took"        // duration of a flush
	KeyBytes       = "bytes"       // pending bytes
	KeyArea        = "area"        // area of expired records
	KeyRule        = "rule"        // retention rule
	KeyReady       = "ready"       // ready segments
	KeyClaimed     = "claimed"     // ready segments held by a live claim
	KeyQuarantined = "quarantined" // segments in quarantine
	KeyOldest      = "oldest"      // age of the oldest ready record
)

// Writer is a dlqdump.MetricsWriter that logs each event through a
// *slog.Logger. It is safe for concurrent use. The zero value is not usable;
// create one with New.
type Writer struct {
	l   *slog.Logger
	ctx context.Context

	record slog.Level // Dump, Restore, Retry
	state  slog.Level // Pending, Source
	event  slog.Level // Flush, Quarantine
	fail   slog.Level // Fail
}

var _ dlqdump.MetricsWriter = (*Writer)(nil)

// Option configures a Writer in New.
type Option func(*Writer)

// WithRecordLevel sets the level of the per-record events Dump, Restore and
// Retry. Default slog.LevelDebug.
func WithRecordLevel(l slog.Level) Option { return func(w *Writer) { w.record = l } }

// WithStateLevel sets the level of the state reports Pending and Source.
// Default slog.LevelDebug.
func WithStateLevel(l slog.Level) Option { return func(w *Writer) { w.state = l } }

// WithEventLevel sets the level of Flush and Quarantine. Default
// slog.LevelInfo.
func WithEventLevel(l slog.Level) Option { return func(w *Writer) { w.event = l } }

// WithFailLevel sets the level of Fail. Default slog.LevelWarn.
func WithFailLevel(l slog.Level) Option { return func(w *Writer) { w.fail = l } }

// WithContext sets the context passed to the logger's handler with every
// record, for handlers that read values from it. Default
// context.Background(). A nil ctx is ignored.
func WithContext(ctx context.Context) Option {
	return func(w *Writer) {
		if ctx != nil {
			w.ctx = ctx
		}
	}
}

// New returns a Writer logging through logger, or through slog.Default() when
// logger is nil. To tell queues apart, pass a logger made with
// logger.With("queue", name).
func New(logger *slog.Logger, opts ...Option) *Writer {
	if logger == nil {
		logger = slog.Default()
	}
	w := &Writer{
		l:      logger,
		ctx:    context.Background(),
		record: slog.LevelDebug,
		state:  slog.LevelDebug,
		event:  slog.LevelInfo,
		fail:   slog.LevelWarn,
	}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	return w
}

// Dump logs a record accepted by Queue.Enqueue, with the size of its encoded
// body.
func (w *Writer) Dump(size int) {
	if !w.l.Enabled(w.ctx, w.record) {
		return
	}
	w.l.LogAttrs(w.ctx, w.record, MsgDump, slog.Int(KeySize, size))
}

// Flush logs a published segment: the reason, its records, its stored bytes
// and how long sealing and publishing took.
func (w *Writer) Flush(reason string, records, size int, took time.Duration) {
	if !w.l.Enabled(w.ctx, w.event) {
		return
	}
	w.l.LogAttrs(w.ctx, w.event, MsgFlush,
		slog.String(KeyReason, reason),
		slog.Int(KeyRecords, records),
		slog.Int(KeySize, size),
		slog.Duration(KeyTook, took))
}

// Pending logs the bytes accepted but not yet written.
func (w *Writer) Pending(bytes int64) {
	if !w.l.Enabled(w.ctx, w.state) {
		return
	}
	w.l.LogAttrs(w.ctx, w.state, MsgPending, slog.Int64(KeyBytes, bytes))
}

// Restore logs records delivered to the destination (a block's worth), with
// their payload bytes.
func (w *Writer) Restore(records, bytes int) {
	if !w.l.Enabled(w.ctx, w.record) {
		return
	}
	w.l.LogAttrs(w.ctx, w.record, MsgRestore, slog.Int(KeyRecords, records), slog.Int(KeySize, bytes))
}

// Retry logs a record the destination refused that will be offered again.
func (w *Writer) Retry() {
	if !w.l.Enabled(w.ctx, w.record) {
		return
	}
	w.l.LogAttrs(w.ctx, w.record, MsgRetry)
}

// Quarantine logs records moved aside, with the reason.
func (w *Writer) Quarantine(reason string, records int) {
	if !w.l.Enabled(w.ctx, w.event) {
		return
	}
	w.l.LogAttrs(w.ctx, w.event, MsgQuarantine,
		slog.String(KeyReason, reason),
		slog.Int(KeyRecords, records))
}

// Expire logs the records of a segment removed by the retention, with its
// area and rule.
func (w *Writer) Expire(area, rule string, records int) {
	if !w.l.Enabled(w.ctx, w.event) {
		return
	}
	w.l.LogAttrs(w.ctx, w.event, MsgExpire, slog.String(KeyArea, area), slog.String(KeyRule, rule), slog.Int(KeyRecords, records))
}

// Fail logs a failed operation with its short stable reason.
func (w *Writer) Fail(reason string) {
	if !w.l.Enabled(w.ctx, w.fail) {
		return
	}
	w.l.LogAttrs(w.ctx, w.fail, MsgFail, slog.String(KeyReason, reason))
}

// Source logs the state of the Restorer's store: ready, claimed and
// quarantined segments and the age of the oldest ready record.
func (w *Writer) Source(ready, claimed, quarantined int, oldest time.Duration) {
	if !w.l.Enabled(w.ctx, w.state) {
		return
	}
	w.l.LogAttrs(w.ctx, w.state, MsgSource,
		slog.Int(KeyReady, ready),
		slog.Int(KeyClaimed, claimed),
		slog.Int(KeyQuarantined, quarantined),
		slog.Duration(KeyOldest, oldest))
}

package dlqdump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dlqdump/dlqdump/segment"
)

// Transform changes a record on its way to the destination
// (RunOptions.Transform): its payload, its headers, or both, in *r. The
// stored record never changes: what a Transform does is what is delivered
// (and, in a dry run, what Report.Changes shows). An error sends the record
// to quarantine instead, with the error as the reason ("transform: ..."),
// the stored original kept there unchanged; nothing is lost. An error
// wrapping ErrUnavailable (a service the Transform needs is down) stops the
// pass at that record instead, like a destination that is down, and so does
// ctx ending. A record it makes larger than Config.MaxRecordSize is
// quarantined. A Transform is called from one goroutine per segment in
// flight at a time, in record order within a segment, unless
// RunOptions.TransformWorkers says otherwise.
//
// The package transform makes one of a jq program (restore --jq, a job's
// Spec.JQ, the console's preview).
type Transform func(ctx context.Context, r *Replay) error

// Replay is a record on its way to the destination, as a Transform sees
// and changes it.
type Replay struct {
	// ID is the record's ID. The record delivered carries it whatever
	// the Transform does (in HeaderRecordID).
	ID RecordID
	// Time is when the record entered the dump.
	Time time.Time
	// Payload is what Config.Decoder decodes and the destination gets:
	// the Restorer's copy of the stored payload. A Transform may change
	// it in place or give it another slice.
	Payload []byte
	// Headers are what the destination gets with the item (a
	// HeaderCarrier's, an Envelope's): a copy of the stored headers that
	// the Transform may change. The Restorer then sets HeaderReplays
	// (the stored count plus one) and HeaderRecordID on what is
	// delivered.
	Headers Headers
}

// Change is a record a dry run's Transform changed or refused
// (Report.Changes): the record before and after, or why it would be
// quarantined.
type Change struct {
	// Before is the record as stored, After as it would be delivered
	// (After is Before when Err is set).
	Before, After Replay
	// Err is the Transform's error: the record would be quarantined
	// with it. "" when it was transformed.
	Err string
}

// Changed reports whether the Transform changed the record.
func (c *Change) Changed() bool {
	return c.Err == "" && (!bytes.Equal(c.Before.Payload, c.After.Payload) || !maps.Equal(c.Before.Headers, c.After.Headers))
}

// transform runs the pass's Transform on rec, or takes its result from the
// block's records transformed ahead (restore_ahead.go). It returns the
// record to deliver, or the outcome when the record is not delivered: set
// aside (the Transform refused it) or stopped (ErrUnavailable, the pass's
// context).
func (g *segRun) transform(rec *segment.Record) (*Replay, *outcome) {
	var before *Replay
	sample := g.dry && g.opts.reserveSample()
	rp, err, done := g.ahead.take(rec)
	if !done {
		rp = g.replayOf(rec)
		if sample {
			before = &Replay{ID: rp.ID, Time: rp.Time, Payload: slices.Clone(rp.Payload), Headers: maps.Clone(rp.Headers)}
		}
		err = g.runTransform(rp)
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrUnavailable) || g.ctx.Err() != nil:
		return nil, &outcome{kind: stopped, err: fmt.Errorf("transform: record %s: %w", rp.ID, err)}
	default:
		if sample {
			g.rep.Changes = append(g.rep.Changes, Change{Before: *before, After: *before, Err: err.Error()})
		}
		// Labelled "transform" in Report.ByReason and the metrics.
		return nil, &outcome{kind: setAside, label: "transform", reason: "transform: " + err.Error()}
	}
	if sample {
		c := Change{Before: *before, After: Replay{ID: rp.ID, Time: rp.Time, Payload: slices.Clone(rp.Payload), Headers: maps.Clone(rp.Headers)}}
		if c.Changed() {
			g.rep.Changes = append(g.rep.Changes, c)
		} else {
			g.opts.sampled.Add(-1) // not kept: the next record may be
		}
	}
	return rp, nil
}

// replayOf returns the Replay a Transform gets of rec: its payload (the
// block's bytes) and a copy of its headers, without HeaderRecordID.
func (g *segRun) replayOf(rec *segment.Record) *Replay {
	rp := &Replay{ID: g.hdr.RecordID(rec), Time: time.Unix(0, rec.Time).UTC(), Payload: rec.Payload, Headers: Headers(rec.Headers.Map())}
	if rp.Headers == nil {
		rp.Headers = Headers{}
	}
	delete(rp.Headers, HeaderRecordID) // the ID is rp.ID
	return rp
}

// runTransform runs the Transform on rp; a record it makes larger than
// Config.MaxRecordSize is refused (nothing larger is delivered, nor held
// by the records transformed ahead).
func (g *segRun) runTransform(rp *Replay) error {
	if err := g.callTransform(rp); err != nil {
		return err
	}
	if rp.Headers == nil {
		rp.Headers = Headers{}
	}
	if maxRecord, _ := g.r.c.maxRecordSize(); rp.size() > maxRecord {
		return fmt.Errorf("the record returned is %d bytes (payload and headers), more than Config.MaxRecordSize (%d)", rp.size(), maxRecord)
	}
	return nil
}

// size returns the bytes of r's payload and headers.
func (r *Replay) size() int {
	n := len(r.Payload)
	for k, v := range r.Headers {
		n += len(k) + len(v)
	}
	return n
}

// reserveSample reserves a place in the pass's sample of changes (the
// segments in flight share it) and reports whether there was one.
func (o *RunOptions) reserveSample() bool {
	for {
		n := o.sampled.Load()
		if n >= int64(o.Sample) {
			return false
		}
		if o.sampled.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// callTransform calls the Transform, a panic in it being its error.
func (g *segRun) callTransform(rp *Replay) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return g.opts.Transform(g.ctx, rp)
}

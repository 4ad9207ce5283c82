package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/segment"
)

// record handles one record: it is skipped (the pass's filters do not select
// it), set aside for quarantine, or delivered. What became of it is applied
// by done, in record order: at once, or, with Config.Concurrency above 1,
// once every record before it was (see window).
func (g *segRun) record(rec *segment.Record) error {
	r := g.r
	if err := g.stopped(); err != nil {
		return err
	}
	if g.filtered && !g.selects(rec) {
		return g.settle(rec, outcome{kind: skipped})
	}
	if g.opts.Limit > 0 && g.taken() >= g.opts.Limit {
		if g.carve {
			// Left in the segment for a later pass: the run goes on
			// to the end, and delivers what it carved.
			return g.settle(rec, outcome{kind: skipped})
		}
		return errStop
	}
	if g.carve {
		return g.settle(rec, outcome{kind: carved})
	}
	if g.opts.Discard != "" {
		// Set aside as a refused record is, labelled DiscardLabel.
		return g.settle(rec, outcome{kind: setAside, label: "discarded", reason: "discarded: " + g.opts.Discard})
	}
	replays := replaysOf(rec)
	if r.c.MaxReplays >= 0 && replays >= r.c.MaxReplays {
		return g.settle(rec, outcome{kind: setAside, label: "replays", reason: fmt.Sprintf("replayed %d times, MaxReplays is %d", replays, r.c.MaxReplays)})
	}
	payload, decodeErr := rec.Payload, "decode: "
	var rp *Replay
	if g.opts.Transform != nil {
		var o *outcome
		if rp, o = g.transform(rec); o != nil {
			return g.settle(rec, *o)
		}
		payload, decodeErr = rp.Payload, "decode (after the transform): "
	}
	item, err := r.c.Decoder.Decode(payload)
	if err != nil {
		return g.settle(rec, outcome{kind: setAside, label: "decode", reason: decodeErr + err.Error()})
	}
	if g.dry {
		return g.settle(rec, outcome{kind: delivered})
	}
	item = r.withHeaders(item, &g.hdr, rec, rp, replays)
	if g.win != nil {
		if err := g.pace(g.waits); err != nil {
			return g.cutShort(err)
		}
		return g.win.deliver(rec, item)
	}
	var retried uint64
	err = g.deliver(g.ctx, g.waits, item, &retried, false)
	g.rep.Retried += retried
	return g.done(rec, deliveryOutcome(g.cutShort(err)))
}

// takeDelivery waits for the Restorer's delivery token: one segment's run
// at a time hands records to the destination (restore_pipeline.go), or ctx's
// error.
func (r *Restorer) takeDelivery(ctx context.Context) error {
	select {
	case r.delivering <- struct{}{}:
		return nil
	default:
	}
	select {
	case r.delivering <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// giveDelivery gives the delivery token back.
func (r *Restorer) giveDelivery() { <-r.delivering }

// fate is what became of a record.
type fate uint8

const (
	delivered fate = iota // the destination accepted it (or, in a dry run, would be offered it)
	skipped               // not selected by the pass's filters: left for the remainder
	setAside              // for quarantine, with a reason
	carved                // taken out of the segment into a side segment (RunOptions.Carve)
	stopped               // not delivered: the pass stops at it (err says why)
)

// outcome is what became of a record.
type outcome struct {
	kind          fate
	label, reason string // setAside
	err           error  // stopped
}

// deliveryOutcome returns the outcome of a delivery that returned err.
func deliveryOutcome(err error) outcome {
	var refused *refusedError
	switch {
	case err == nil:
		return outcome{kind: delivered}
	case errors.As(err, &refused):
		return outcome{kind: setAside, label: "refused", reason: err.Error()}
	}
	return outcome{kind: stopped, err: err}
}

// settle applies an outcome known without a delivery: at once, unless
// deliveries before it are still in flight.
func (g *segRun) settle(rec *segment.Record, o outcome) error {
	if g.win != nil && g.win.busy() {
		return g.win.push(rec, o)
	}
	return g.done(rec, o)
}

// done applies what became of a record of the block being handled, in record
// order. A stopped record's error is returned: the pass stops there.
func (g *segRun) done(rec *segment.Record, o outcome) error {
	switch o.kind {
	case stopped:
		return o.err
	case skipped:
		g.rep.Skipped++
		g.prog.Skipped++
		g.prog.SetAside(g.blk.Info().Offset, rec.Seq, false, "")
	case setAside:
		g.setAside(g.blk.Info().Offset, rec, o.label, o.reason)
	case carved:
		g.prog.CarveRecord(g.blk.Info().Offset, rec.Seq)
		g.carved++
		g.rep.Carved++
	case delivered:
		g.prog.Delivered++
		g.rep.Delivered++
		g.rep.Bytes += uint64(len(rec.Payload))
		g.reasons.count(rec)
		g.delivered++
		g.bytes += uint64(len(rec.Payload))
	}
	if g.rescan {
		g.cursor = rec.Seq + 1
	}
	g.tick()
	if !g.saved().Full() {
		return nil
	}
	// One block can set aside more than a claim record holds: write them
	// out from the middle of it.
	if !g.rescan {
		info := g.blk.Info()
		next := segment.Position{Offset: info.Offset, Seq: rec.Seq + 1}
		if next.Seq >= info.FirstSeq+uint64(info.Count) {
			next = g.blk.Next()
		}
		g.prog.Offset, g.prog.Seq = next.Offset, next.Seq
	}
	return g.writeSides(true)
}

// taken counts the records this pass delivered or quarantined, those it
// handed to the destination whose delivery has not ended and those this
// run carved, to deliver from their side segment: what RunOptions.Limit
// bounds.
func (g *segRun) taken() uint64 {
	n := g.rep.Delivered + g.rep.Quarantined + g.carved
	if g.win != nil {
		n += uint64(g.win.taking)
	}
	return n
}

// setAside marks a record for quarantine with the reason; it is written to a
// quarantine segment when the segment is finished or the progress is full.
func (g *segRun) setAside(blockOffset int64, rec *segment.Record, label, reason string) {
	g.prog.Quarantined++
	g.prog.SetAside(blockOffset, rec.Seq, true, reason)
	if g.prog.Labels == nil {
		g.prog.Labels = map[string]uint64{}
	}
	g.prog.Labels[label]++
	g.rep.Quarantined++
	if g.dry {
		g.rep.ByReason["quarantine: "+label]++
	}
}

// replaysOf returns the record's replay count, 0 when absent or malformed.
func replaysOf(rec *segment.Record) int {
	v, ok := rec.Headers.Lookup(HeaderReplays)
	if !ok {
		return 0
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' || n > 1<<20 {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// withHeaders gives the item the record's headers (those the Transform
// returned, rp, when there is one), the replay count raised and the
// record's ID in HeaderRecordID, when the item carries headers or envelopes
// are delivered.
func (r *Restorer) withHeaders(item any, hdr *segment.Header, rec *segment.Record, rp *Replay, replays int) any {
	carrier, isCarrier := item.(HeaderCarrier)
	if !isCarrier && !r.c.DeliverEnvelope {
		return item
	}
	var h Headers
	var id RecordID
	if rp != nil {
		h, id = rp.Headers, rp.ID
	} else {
		h, id = Headers(rec.Headers.Map()), hdr.RecordID(rec)
		if h == nil {
			h = Headers{}
		}
	}
	h[HeaderReplays] = strconv.Itoa(replays + 1)
	h[HeaderRecordID] = id.String()
	if isCarrier {
		carrier.SetDLQHeaders(h)
	}
	if r.c.DeliverEnvelope {
		return &Envelope{Item: item, Headers: h}
	}
	return item
}

// refusedError is a record the destination refused MaxAttempts times.
type refusedError struct {
	attempts int
	err      error
}

func (e *refusedError) Error() string {
	if e.attempts == 1 {
		return fmt.Sprintf("refused by the destination: %v", e.err)
	}
	return fmt.Sprintf("refused by the destination %d times: %v", e.attempts, e.err)
}

func (e *refusedError) Unwrap() error { return e.err }

// deliver enqueues item into the destination: waiting while its Rate is above
// AllowRate, within RateLimit (pace, on waits: a stop cuts them short),
// retrying refusals with backoff and full jitter, counting the retries in
// *retried. With paced, its first attempt was paced already, and goes to
// the destination whatever ctx says: the record was handed out. A refusal
// while ctx is being cancelled is the cancellation, never a refusal: the
// record is not set aside. A refusal wrapping ErrUnavailable that is still
// there after MaxAttempts stops the pass instead of setting the record
// aside. It is called from the window's goroutines too: it changes nothing
// of g but through *retried.
func (g *segRun) deliver(ctx, waits context.Context, item any, retried *uint64, paced bool) (err error) {
	r := g.r
	if r.c.tracer != nil { // Config.TracerProvider (trace.go)
		before, end := *retried, r.traceReplay(ctx, item)
		defer func() { end(err, *retried-before) }()
	}
	for attempt := 1; ; attempt++ {
		if !paced || attempt > 1 {
			if err := ctx.Err(); err != nil {
				return err // stopped: this record is the next to deliver
			}
			if err := g.pace(waits); err != nil {
				return err
			}
		}
		if err := g.keep.Hold(); err != nil {
			return err
		}
		err := g.opts.dest.Enqueue(item)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w (the destination said: %w)", cerr, err)
		}
		if attempt >= r.c.MaxAttempts {
			if errors.Is(err, ErrUnavailable) {
				return err
			}
			return &refusedError{attempts: attempt, err: err}
		}
		*retried++
		r.retried.Add(1)
		r.mw.Retry()
		if err := backoff.Sleep(waits, backoff.FullJitter(r.c.RetryBase, r.c.RetryMax, attempt)); err != nil {
			return err
		}
	}
}

// waitRoom waits while the destination's Rate is above AllowRate.
func (g *segRun) waitRoom(ctx context.Context) error {
	r, rater := g.r, g.opts.rater
	if rater == nil || r.c.AllowRate >= 1 {
		return nil
	}
	for rater.Rate() > r.c.AllowRate {
		if err := backoff.Sleep(ctx, r.c.PostponeInterval); err != nil {
			return err
		}
	}
	return nil
}

// reasonCounter counts records by HeaderReason into m without a map
// operation per record: a run of records with the same reason is counted
// first and added when the reason changes or the block ends.
type reasonCounter struct {
	m    map[string]uint64
	last []byte
	n    uint64
}

func (c *reasonCounter) count(rec *segment.Record) {
	v, _ := rec.Headers.Lookup(HeaderReason)
	if c.n > 0 && string(v) == string(c.last) {
		c.n++
		return
	}
	c.flush()
	c.last, c.n = append(c.last[:0], v...), 1
}

func (c *reasonCounter) flush() {
	if c.n > 0 {
		c.m[string(c.last)] += c.n
		c.n = 0
	}
}

package dlqdump

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/segment"
)

// record delivers one record, or sets it aside: for quarantine, or, when the
// pass's filters do not select it, for the remainder.
func (g *segRun) record(blockOffset int64, rec *segment.Record) error {
	r := g.r
	if g.filtered && !g.opts.selects(rec) {
		g.rep.Skipped++
		g.prog.Skipped++
		g.prog.SetAside(blockOffset, rec.Seq, false, "")
		return nil
	}
	if g.opts.Limit > 0 && g.rep.Delivered >= g.opts.Limit {
		return errStop
	}
	replays := replaysOf(rec)
	if r.c.MaxReplays >= 0 && replays >= r.c.MaxReplays {
		return g.setAside(blockOffset, rec, "replays", fmt.Sprintf("replayed %d times, MaxReplays is %d", replays, r.c.MaxReplays))
	}
	item, err := r.c.Decoder.Decode(rec.Payload)
	if err != nil {
		return g.setAside(blockOffset, rec, "decode", "decode: "+err.Error())
	}
	if !g.dry {
		item = r.withHeaders(item, rec, replays)
		err = g.deliver(item)
		var refused *refusedError
		if errors.As(err, &refused) {
			return g.setAside(blockOffset, rec, "refused", err.Error())
		}
		if err != nil {
			return err
		}
	}
	g.prog.Delivered++
	g.rep.Delivered++
	g.rep.Bytes += uint64(len(rec.Payload))
	g.reasons.count(rec)
	g.delivered++
	g.bytes += uint64(len(rec.Payload))
	return nil
}

// setAside marks a record for quarantine with the reason; it is written to a
// quarantine segment when the segment is finished or the progress is full.
func (g *segRun) setAside(blockOffset int64, rec *segment.Record, label, reason string) error {
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
	return nil
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

// withHeaders gives the item the record's headers, the replay count raised,
// when the item carries headers or envelopes are delivered.
func (r *Restorer) withHeaders(item any, rec *segment.Record, replays int) any {
	carrier, isCarrier := item.(HeaderCarrier)
	if !isCarrier && !r.c.DeliverEnvelope {
		return item
	}
	h := Headers(rec.Headers.Map())
	if h == nil {
		h = Headers{}
	}
	h[HeaderReplays] = strconv.Itoa(replays + 1)
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
// AllowRate, within RateLimit, retrying refusals with backoff and full jitter.
// A refusal while the run is being cancelled is the cancellation, never a
// refusal: the record is not set aside.
func (g *segRun) deliver(item any) error {
	r := g.r
	for attempt := 1; ; attempt++ {
		if err := g.ctx.Err(); err != nil {
			return err // stopped: this record is the next to deliver
		}
		if err := g.waitRoom(); err != nil {
			return err
		}
		if r.limiter != nil {
			if err := r.limiter.Wait(g.ctx); err != nil {
				return err
			}
		}
		if err := g.keep.Hold(); err != nil {
			return err
		}
		err := r.c.Queue.Enqueue(item)
		if err == nil {
			return nil
		}
		if cerr := g.ctx.Err(); cerr != nil {
			return fmt.Errorf("%w (the destination said: %w)", cerr, err)
		}
		if attempt >= r.c.MaxAttempts {
			return &refusedError{attempts: attempt, err: err}
		}
		g.rep.Retried++
		r.retried.Add(1)
		r.mw.Retry()
		if err := backoff.Sleep(g.ctx, backoff.FullJitter(r.c.RetryBase, r.c.RetryMax, attempt)); err != nil {
			return err
		}
	}
}

// waitRoom waits while the destination's Rate is above AllowRate.
func (g *segRun) waitRoom() error {
	r := g.r
	if r.c.rater == nil || r.c.AllowRate >= 1 {
		return nil
	}
	for r.c.rater.Rate() > r.c.AllowRate {
		if err := backoff.Sleep(g.ctx, r.c.PostponeInterval); err != nil {
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

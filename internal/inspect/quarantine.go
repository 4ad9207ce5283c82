package inspect

import (
	"context"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// HeaderQuarantine is the header a restorer gives each record it sets aside,
// saying why (dlqdump.HeaderQuarantine).
const HeaderQuarantine = "quarantine"

// Quarantined is what a quarantined segment holds that a restore has not
// handled yet: its records, their time range, and the reasons they carry.
type Quarantined struct {
	Records    uint64
	MinT, MaxT int64 // Unix nanoseconds, when Records > 0
	// Reasons counts the records by their "quarantine" header.
	Reasons map[string]uint64
	// Sealed is set for an encrypted segment no identity given unwraps:
	// Records, MinT and MaxT come from its block headers, and the reasons
	// its records carry are not read.
	Sealed bool
}

// First and Last return the time range, zero without records.
func (q *Quarantined) First() time.Time { return timeOf(q.Records, q.MinT) }

// Last returns the time of the newest record, zero without records.
func (q *Quarantined) Last() time.Time { return timeOf(q.Records, q.MaxT) }

func timeOf(n uint64, t int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, t).UTC()
}

// ScanQuarantined reads a quarantined segment's records (or, without its
// key, block headers), leaving out those its restore progress cv handled.
// damage is called for each damaged part.
func (w *Walker) ScanQuarantined(ctx context.Context, si sink.Info, cv *Claim, damage func(error)) (Quarantined, error) {
	q := Quarantined{Reasons: map[string]uint64{}}
	see := func(t0, t1 int64, n uint64) {
		if q.Records == 0 || t0 < q.MinT {
			q.MinT = t0
		}
		if q.Records == 0 || t1 > q.MaxT {
			q.MaxT = t1
		}
		q.Records += n
	}
	// Without the key of an encrypted segment, its block headers say how
	// many records it holds and when they entered the dump.
	sealed := func(bi segment.BlockInfo) error {
		q.Sealed = true
		n := uint64(0)
		for seq := bi.FirstSeq; seq < bi.FirstSeq+uint64(bi.Count); seq++ {
			if !cv.Skip(seq) {
				n++
			}
		}
		if n > 0 {
			see(bi.MinTime, bi.MaxTime, n)
		}
		return nil
	}
	_, err := w.Walk(ctx, si, WalkOpts{Done: cv, Sealed: sealed}, func(_ *segment.Header, b *segment.Block) error {
		for i := range b.Len() {
			rec := b.Record(i)
			if cv.Skip(rec.Seq) {
				continue
			}
			see(rec.Time, rec.Time, 1)
			if v, ok := rec.Headers.Lookup(HeaderQuarantine); ok {
				q.Reasons[string(v)]++
			}
		}
		return nil
	}, damage)
	return q, err
}

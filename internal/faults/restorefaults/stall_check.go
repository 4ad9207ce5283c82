package restorefaults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/sink"
)

// The end of a stall run: the store finished without faults (the ready
// area drained, the quarantine released and restored), then the run's
// invariants checked.

// drain runs passes of a restorer with c until p's ready area is empty
// (claims left by a paused holder are taken over after their lease).
func drain(ctx context.Context, c *dlqdump.Config, rd sink.Reader) error {
	return passes(ctx, c, rd, dlqdump.RunOptions{}, sink.AreaReady, false)
}

// release releases the quarantine and restores it, and goes on until the
// store is settled (settled, with records).
func release(ctx context.Context, c *dlqdump.Config, rd sink.Reader) error {
	if err := passes(ctx, c, rd, dlqdump.RunOptions{Area: dlqdump.AreaQuarantine}, sink.AreaQuarantine, false); err != nil {
		return err
	}
	return passes(ctx, c, rd, dlqdump.RunOptions{}, sink.AreaReady, true)
}

// settled reports whether area is empty and, with records, whether no
// record is left but those kept by quarantined segments. A claim record
// of a segment that is gone, held by a claim whose write took effect as
// its pass was cut short, is swept by a pass once the restorer has seen it
// unchanged for its lease: the store's last passes wait for that rather
// than stop as the ready area empties.
func settled(ctx context.Context, rd sink.Reader, area sink.Area, records bool) (bool, error) {
	for _, err := range sink.Names(ctx, rd, area) {
		return false, err
	}
	if !records {
		return true, nil
	}
	quarantined := map[string]bool{}
	for n, err := range sink.Names(ctx, rd, sink.AreaQuarantine) {
		if err != nil {
			return false, err
		}
		quarantined[n] = true
	}
	for n, err := range rd.RecordNames(ctx) {
		if err != nil || !quarantined[n] {
			return false, err
		}
	}
	return true, nil
}

// passes runs passes until area is empty (settled: with records, until no
// record is left but those of quarantined segments), or fails after
// jobDeadline.
func passes(ctx context.Context, c *dlqdump.Config, rd sink.Reader, opts dlqdump.RunOptions, area sink.Area, records bool) error {
	r, err := dlqdump.NewRestorer(c)
	if err != nil {
		return err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, jobDeadline)
	defer cancel()
	var last error
	for {
		_, last = r.Run(ctx, opts)
		done, err := settled(ctx, rd, area, records)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		t := time.NewTimer(stallLease / 3)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			what := area.String() + " not empty"
			if records {
				what += " or records of segments gone left"
			}
			return fmt.Errorf("%s after %s (last pass: %v)", what, jobDeadline, errors.Join(last, ctx.Err()))
		}
	}
}

// checkStall checks a stall run's invariants; released are the deliveries
// of the records released from quarantine.
func checkStall(p *Place, hd *Holder, sd *stallSeeded, got, released []string, mw *stallMetrics) []string {
	var v []string
	fail := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	n := map[string]int{}
	for _, it := range got {
		n[it]++
	}
	// Per segment: delivered, or gone whole (expired, deleted by the
	// policy); the records of a damaged block never.
	bySeg := map[string][2]int{} // delivered, undamaged
	// The paused holder's segments in flight may each have delivered a
	// block whose checkpoint the pause held, taken over from the last one:
	// at most a block twice per segment in flight, as after a crash.
	dups := map[string]int{} // by segment
	for _, it := range sd.items {
		if n[it] > 2 {
			fail("%s delivered %d times", it, n[it])
		}
		if n[it] > 1 {
			dups[sd.segOf[it]]++
		}
		if sd.damaged[it] {
			if n[it] > 0 {
				fail("%s, in a damaged block, delivered", it)
			}
			continue
		}
		c := bySeg[sd.segOf[it]]
		c[1]++
		if n[it] > 0 {
			c[0]++
		}
		bySeg[sd.segOf[it]] = c
	}
	for seg, d := range dups {
		if d > sd.maxBlock {
			fail("%d records of segment %s delivered twice, more than a block (%d)", d, seg, sd.maxBlock)
		}
	}
	if len(dups) > dlqdump.DefaultSegmentsInFlight {
		fail("records of %d segments delivered twice, more than the %d in flight", len(dups), dlqdump.DefaultSegmentsInFlight)
	}
	gone := 0
	for seg, c := range bySeg {
		switch {
		case c[0] == c[1]:
		case c[0] == 0 && (hd.Name == "prune" || hd.Name == "delete-version"):
			gone += c[1]
		default:
			fail("segment %s: %d of its %d intact records delivered", seg, c[0], c[1])
		}
	}
	if hd.Name == "prune" && mw.expired.Load() != int64(gone) {
		fail("%d records expired with their segments, %d counted expired (in %d counts)", gone, mw.expired.Load(), mw.expiredSegments.Load())
	}
	if hd.Name != "prune" && mw.expired.Load() != 0 {
		fail("%d records counted expired, no retention set", mw.expired.Load())
	}
	if hd.Name == "quarantine-version" {
		mw.mu.Lock()
		q := mw.quarantined["version"]
		mw.mu.Unlock()
		if q != int64(len(released)) {
			fail("%d records released from quarantine, %d counted quarantined for their version", len(released), q)
		}
	}
	if int(mw.restored.Load()) != len(got) {
		fail("metrics count %d records restored, the destination received %d", mw.restored.Load(), len(got))
	}
	left, err := p.leftovers(false)
	if err != nil {
		fail("list the store: %v", err)
	}
	quarantined, err := p.segmentNames(sink.AreaQuarantine)
	if err != nil {
		fail("list the quarantine: %v", err)
	}
	for _, q := range quarantined {
		left = append(left, "quarantine/"+q)
	}
	if len(left) > 0 {
		fail("left in the store: %v", left)
	}
	return v
}

// segmentsTwice returns how many segments items holds records of more than
// once.
func segmentsTwice(sd *stallSeeded, items []string) int {
	seen := make(map[string]bool, len(items))
	segs := map[string]bool{}
	for _, it := range items {
		if seen[it] {
			segs[sd.segOf[it]] = true
		}
		seen[it] = true
	}
	return len(segs)
}

// distinct returns how many different items s holds.
func distinct(s []string) int {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return len(m)
}

package claims

import (
	"encoding/json"
	"fmt"
	"math/bits"
)

// Progress is how far restoring a segment got, saved in its record with every
// checkpoint. Every record before the position (Offset, Seq) was delivered,
// or set aside: listed in Aside (not yet written anywhere else: it is still
// only in the segment), or already copied into a side segment (a quarantine
// segment, or a ready "remainder" holding what a filtered pass left). So
// the progress describes all the work done, and a restorer that takes the
// segment over, after any interruption, neither repeats nor loses any of it.
type Progress struct {
	// Offset and Seq are the position of the next record to handle
	// (segment.Position).
	Offset int64  `json:"offset"`
	Seq    uint64 `json:"seq"`
	// Delivered, Quarantined and Skipped count the records delivered,
	// set aside for quarantine and left by filters so far.
	Delivered   uint64 `json:"delivered"`
	Quarantined uint64 `json:"quarantined,omitempty"`
	Skipped     uint64 `json:"skipped,omitempty"`
	// Aside lists the records before the position that were set aside and
	// are not yet in a side segment, with Reasons holding their reasons.
	Aside   []Aside  `json:"aside,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	// Sides counts the side segments written for this segment so far.
	Sides int `json:"sides,omitempty"`
	// Remainders counts those of them holding records the filters of the
	// pass that wrote them left (a remainder copied out when the progress
	// was full): records another pass may select, in segments it may not
	// have listed.
	Remainders int `json:"remainders,omitempty"`
	// Carve lists the records a carving pass (RunOptions.Carve) selected
	// and took out of the segment, not yet in their side segment: like
	// Aside, runs in order before the position, apart from each other
	// (not from Aside's: the two interleave).
	// On the store they are among the Aside runs, marked Carved
	// (progress_carve.go: an older dlqdump sees them set aside for
	// quarantine).
	Carve []Aside `json:"-"`
	// Writing names the side segments being written from runs this
	// progress still lists: set in the save that writes the runs down
	// before their side segments, cleared in the save that drops them. A
	// side segment this names may be published again by whoever resumes
	// the segment, so it is not claimed meanwhile (Claimer.Claim); one it
	// does not name holds records this segment no longer lists.
	Writing []string `json:"writing,omitempty"`
	// Labels counts the records set aside for quarantine by why, in short
	// stable words ("decode", "refused", "replays"), for metrics.
	Labels map[string]uint64 `json:"labels,omitempty"`
	// Damaged counts the damaged blocks skipped, and Damage describes the
	// first.
	Damaged int    `json:"damaged,omitempty"`
	Damage  string `json:"damage,omitempty"`
	// Done says that every record was handled: what remains is to write
	// the side segment of the Aside runs set aside for quarantine, and to
	// finish the segment, unless runs the filters left remain (a selective
	// pass leaves them in the segment, which stays ready: a later pass
	// reads those records only).
	Done bool `json:"done,omitempty"`
	// Successor names the segment that dlqdump rewrap copies this one into
	// (the same blocks, the data key wrapped anew), saved before the copy
	// is published: once the copy is there, this segment holds nothing
	// left to restore, and a restorer taking it over finishes it; while it
	// is not, the rewrap did not happen.
	Successor string `json:"successor,omitempty"`

	size int // estimated encoded size of Aside and Reasons; -1: to count
}

// Aside is a run of records set aside in one block: all of [From, To), or,
// with Mask, those whose bit is set (bit i of Mask is record From+i), so that
// records set aside between others (a filter selecting every other record)
// still take a few bits each.
type Aside struct {
	// Offset is the offset of the block holding the records.
	Offset int64 `json:"o"`
	// From and To are the sequence numbers of the first record and of the
	// one after the last.
	From uint64 `json:"f"`
	To   uint64 `json:"t"`
	// Mask, when set, selects records of [From, To).
	Mask []byte `json:"m,omitempty"`
	// Quarantine: the records go to quarantine with Reasons[Reason];
	// otherwise they go back to the ready area (a filtered pass's
	// remainder).
	Quarantine bool `json:"q,omitempty"`
	Reason     int  `json:"r,omitempty"`
	// Carved marks, on the store, a run of Progress.Carve written among
	// the Aside runs (progress_carve.go); never set in a parsed Progress.
	Carved bool `json:"c,omitempty"`
}

// Records returns the number of records of a run.
func (a Aside) Records() uint64 {
	if a.Mask == nil {
		return a.To - a.From
	}
	var n uint64
	for _, b := range a.Mask {
		n += uint64(bits.OnesCount8(b))
	}
	return n
}

// Has reports whether the run holds record seq.
func (a Aside) Has(seq uint64) bool {
	if seq < a.From || seq >= a.To {
		return false
	}
	if a.Mask == nil {
		return true
	}
	i := seq - a.From
	return a.Mask[i/8]&(1<<(i%8)) != 0
}

// Since returns the part of the run from record seq on, and whether there is
// any: a run that ends before seq has none, one that starts at or after it
// is whole.
func (a Aside) Since(seq uint64) (Aside, bool) {
	switch {
	case seq <= a.From:
		return a, true
	case seq >= a.To:
		return Aside{}, false
	case a.Mask == nil:
		a.From = seq
		return a, true
	}
	// Keep the records of [seq, To) whose bits are set, from the first.
	out := Aside{Offset: a.Offset, Quarantine: a.Quarantine, Reason: a.Reason}
	for s := seq; s < a.To; s++ {
		if !a.Has(s) {
			continue
		}
		if out.To == 0 {
			out.From, out.To = s, s+1
			continue
		}
		out.add(s)
	}
	return out, out.To != 0
}

// maxMaskRecords bounds the span of a masked run.
const maxMaskRecords = 1 << 16

// Limits on a Progress, so that a record stays small; past them the Restorer
// writes the side segments and empties Aside.
const (
	MaxAside   = 256
	MaxReasons = 32
	// MaxReasonLen bounds each reason kept.
	MaxReasonLen = 256
)

// MaxProgressSize bounds the encoded size of a progress: past it (or past
// MaxAside runs or MaxReasons reasons) the records set aside are written to
// side segments, so a record stays well under sink.MaxRecordSize.
const MaxProgressSize = 16 << 10

// MaxWriting bounds Progress.Writing (a quarantine side, a carved side and
// a remainder at most), and MaxNameLen each name in it.
const (
	MaxWriting = 4
	MaxNameLen = 256
)

// Full reports whether Aside, Carve or Reasons reached their limits.
func (p *Progress) Full() bool {
	if len(p.Aside)+len(p.Carve) >= MaxAside || len(p.Reasons) >= MaxReasons {
		return true
	}
	if p.size < 0 { // parsed: not counted yet
		p.size = 0
		for _, a := range p.Aside {
			p.size += runSize(len(a.Mask))
		}
		for _, a := range p.Carve {
			p.size += runSize(len(a.Mask))
		}
		for _, r := range p.Reasons {
			p.size += len(r) + 8
		}
	}
	return p.size >= MaxProgressSize
}

// runSize estimates the encoded size of a run with a mask of n bytes: the
// base64 mask and the numbers.
func runSize(n int) int { return n*4/3 + 48 }

// SetAside adds one record (seq, in the block at offset) to Aside, extending
// the last run when it continues it.
func (p *Progress) SetAside(offset int64, seq uint64, quarantine bool, reason string) {
	r := 0
	if quarantine {
		r = p.reason(reason)
	}
	if p.size < 0 {
		p.Full() // count what was parsed
	}
	p.Aside = p.extend(p.Aside, offset, seq, quarantine, r)
}

// CarveRecord adds one record (seq, in the block at offset) to Carve,
// extending the last run when it continues it.
func (p *Progress) CarveRecord(offset int64, seq uint64) {
	if p.size < 0 {
		p.Full() // count what was parsed
	}
	p.Carve = p.extend(p.Carve, offset, seq, false, 0)
}

// extend adds record seq of the block at offset to runs, extending the last
// run when it continues it.
func (p *Progress) extend(runs []Aside, offset int64, seq uint64, quarantine bool, r int) []Aside {
	if n := len(runs); n > 0 {
		last := &runs[n-1]
		if last.Offset == offset && last.To <= seq && last.Quarantine == quarantine && last.Reason == r && seq-last.From < maxMaskRecords {
			before := len(last.Mask)
			last.add(seq)
			p.size += runSize(len(last.Mask)) - runSize(before)
			return runs
		}
	}
	p.size += runSize(0)
	return append(runs, Aside{Offset: offset, From: seq, To: seq + 1, Quarantine: quarantine, Reason: r})
}

// LeaveRun adds the records [from, to) of the block at offset to Aside as a
// run left by the filters (not for quarantine), after the runs there: a
// block a selective pass did not read, because nothing in it can be
// selected.
func (p *Progress) LeaveRun(offset int64, from, to uint64) {
	if p.size < 0 {
		p.Full() // count what was parsed
	}
	p.Aside = append(p.Aside, Aside{Offset: offset, From: from, To: to})
	p.size += runSize(0)
}

// add extends the run to seq (>= To), masking the records in between out.
func (a *Aside) add(seq uint64) {
	if seq == a.To && a.Mask == nil {
		a.To++
		return
	}
	if a.Mask == nil {
		n := a.To - a.From
		a.Mask = make([]byte, (n+7)/8)
		for i := range n {
			a.Mask[i/8] |= 1 << (i % 8)
		}
	}
	i := seq - a.From
	for uint64(len(a.Mask)) <= i/8 {
		a.Mask = append(a.Mask, 0)
	}
	a.Mask[i/8] |= 1 << (i % 8)
	a.To = seq + 1
}

func (p *Progress) reason(s string) int {
	if len(s) > MaxReasonLen {
		s = s[:MaxReasonLen] + "..."
	}
	for i, r := range p.Reasons {
		if r == s {
			return i
		}
	}
	p.Reasons = append(p.Reasons, s)
	p.size += len(s) + 8
	return len(p.Reasons) - 1
}

// ClearAside forgets the runs set aside and carved and their reasons, once
// they are in side segments.
func (p *Progress) ClearAside() {
	p.Aside, p.Carve, p.Reasons, p.size = nil, nil, nil, 0
}

// Reason returns the reason of a quarantined run.
func (p *Progress) Reason(a Aside) string {
	if a.Reason >= 0 && a.Reason < len(p.Reasons) {
		return p.Reasons[a.Reason]
	}
	return "unknown"
}

// Started reports whether any work was recorded.
func (p *Progress) Started() bool {
	return p.Offset != 0 || p.Seq != 0 || p.Delivered != 0 || p.Quarantined != 0 || p.Skipped != 0 || p.Done
}

// InFlight reports whether p holds work a restorer began and has not
// finished: records set aside (Aside) or carved (Carve) not yet in their
// side segments, side segments being written (WritingSides), or every
// record handled (Done: what remains is to finish the segment). A command
// that replaces the segment by a copy of its own carrying the progress
// (dlqdump summarize, rewrap) refuses such a segment: the runs and
// positions may not hold in the copy, and a side segment being written
// would be written again from it.
func (p *Progress) InFlight() bool {
	return len(p.Aside) > 0 || p.Done || p.WritingSides()
}

// WritingSides reports whether side segments may be being written from p:
// carved runs (Carve) or side segments named (Writing). Their records are
// reserved in the store as pending on this segment; a command that moves
// the segment with its progress to another store (dlqdump mv) refuses it,
// or the side segments would be written in both.
func (p *Progress) WritingSides() bool {
	return len(p.Carve) > 0 || len(p.Writing) > 0
}

// Listed reports whether record seq is listed in Aside or Carve: set aside
// or carved, and not yet in a side segment (still only in the segment).
func (p *Progress) Listed(seq uint64) bool {
	for _, runs := range [][]Aside{p.Aside, p.Carve} {
		for _, a := range runs {
			if a.Has(seq) {
				return true
			}
		}
	}
	return false
}

// Marshal encodes p.
func (p *Progress) Marshal() json.RawMessage {
	b, _ := json.Marshal(p.stored()) // a Progress always marshals
	return b
}

// ParseProgress decodes a record's progress; nil or empty is the start.
func ParseProgress(b json.RawMessage) (Progress, error) {
	var p Progress
	if len(b) == 0 {
		return p, nil
	}
	p.size = -1
	if err := json.Unmarshal(b, &p); err != nil {
		return Progress{}, fmt.Errorf("dlqdump: damaged progress in a claim record: %w", err)
	}
	if err := p.splitCarved(); err != nil {
		return Progress{}, err
	}
	if len(p.Aside)+len(p.Carve) > MaxAside || len(p.Reasons) > MaxReasons {
		return Progress{}, fmt.Errorf("dlqdump: damaged progress in a claim record: %d runs and %d reasons, at most %d and %d", len(p.Aside)+len(p.Carve), len(p.Reasons), MaxAside, MaxReasons)
	}
	if len(p.Writing) > MaxWriting {
		return Progress{}, fmt.Errorf("dlqdump: damaged progress in a claim record: %d side segments being written, at most %d", len(p.Writing), MaxWriting)
	}
	for _, n := range p.Writing {
		if n == "" || len(n) > MaxNameLen {
			return Progress{}, fmt.Errorf("dlqdump: damaged progress in a claim record: a side segment being written is named %.40q (1 to %d bytes)", n, MaxNameLen)
		}
	}
	for _, runs := range [][]Aside{p.Aside, p.Carve} {
		for i, a := range runs {
			if a.To <= a.From || a.Offset < 0 || a.Quarantine && (a.Reason < 0 || a.Reason >= len(p.Reasons)) ||
				a.Mask != nil && (a.To-a.From > maxMaskRecords || uint64(len(a.Mask)) != (a.To-a.From+7)/8) ||
				i > 0 && (a.From < runs[i-1].To || a.Offset < runs[i-1].Offset) || a.To > p.Seq {
				return Progress{}, fmt.Errorf("dlqdump: damaged progress in a claim record: bad run %+v (runs must be in order, apart, and before the position)", a)
			}
		}
	}
	return p, nil
}

package inspect

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// Claim is what a segment's claim record says: who claimed it last, whether
// the claim is held, released, or kept by a segment moved to quarantine, and
// how far restoring it got.
type Claim struct {
	Rec     claims.Record
	Prog    claims.Progress
	ProgErr error // the progress does not parse
}

// NewClaim returns the view of a record, its progress parsed.
func NewClaim(rec claims.Record) *Claim {
	v := &Claim{Rec: rec}
	v.Prog, v.ProgErr = claims.ParseProgress(rec.Progress)
	return v
}

// Status returns "held", "released" or "quarantined".
func (v *Claim) Status() string {
	switch {
	case v.Rec.Held():
		return "held"
	case v.Rec.State == claims.StateQuarantined:
		return "quarantined"
	}
	return "released"
}

// Started reports whether the progress says any work was done.
func (v *Claim) Started() bool {
	return v != nil && v.ProgErr == nil && (v.Prog.Started() || len(v.Prog.Aside) > 0 || len(v.Prog.Carve) > 0)
}

// Handled says what a restore did with the records a walk leaves out (""
// when none): "N delivered[, M quarantined]".
func (v *Claim) Handled() string {
	if !v.Started() || v.Prog.Delivered+v.Prog.Quarantined == 0 {
		return ""
	}
	s := fmt.Sprintf("%d delivered", v.Prog.Delivered)
	if v.Prog.Quarantined > 0 {
		s += fmt.Sprintf(", %d quarantined", v.Prog.Quarantined)
	}
	return s
}

// Aside counts the records set aside or carved (by a carving pass: Carved)
// before the position and not yet copied into a side segment: they are
// still only in this segment.
func (v *Claim) Aside() uint64 {
	var n uint64
	for _, r := range v.Prog.Aside {
		n += r.Records()
	}
	return n + v.Carved()
}

// Carved counts the records a carving pass took out of the segment that are
// not yet in their side segment (pending): they are still only here.
func (v *Claim) Carved() uint64 {
	var n uint64
	for _, r := range v.Prog.Carve {
		n += r.Records()
	}
	return n
}

// Remaining counts the records after the position, of records in all: those
// a restore still has to handle.
func (v *Claim) Remaining(records uint64) uint64 {
	if v.Prog.Done || v.Prog.Seq >= records {
		return 0
	}
	return records - v.Prog.Seq
}

// Skip reports whether record seq was handled already: before the position
// and not among the records set aside or carved (which are still only here).
// A nil Claim skips nothing.
func (v *Claim) Skip(seq uint64) bool {
	if v == nil || v.ProgErr != nil || seq >= v.Prog.Seq && !v.Prog.Done {
		return false
	}
	return !v.Prog.Listed(seq)
}

// Until returns when a held claim expires unless renewed: its last write
// plus its lease (by the writer's clock), zero when it is not held.
func (v *Claim) Until(minLease time.Duration) time.Time {
	if v == nil || !v.Rec.Held() || v.Rec.Written.IsZero() {
		return time.Time{}
	}
	return v.Rec.Written.Add(v.Rec.Lease(minLease))
}

// Note describes the record of a segment in area in one line, for people:
// records is the segment's record count, known says whether it is.
func (v *Claim) Note(area sink.Area, records uint64, known bool) string {
	var b strings.Builder
	// by names the owner; a side segment's record has none.
	by := ""
	if v.Rec.Owner != "" {
		by = " by " + v.Rec.Owner
	}
	switch v.Status() {
	case "held":
		fmt.Fprintf(&b, "claimed%s", by)
	case "quarantined":
		if area == sink.AreaReady {
			b.WriteString("released from quarantine; ")
		}
		fmt.Fprintf(&b, "quarantined%s", by)
	default:
		if v.Rec.State == claims.StatePending && v.Rec.Named {
			fmt.Fprintf(&b, "records set aside from %s (restorable once its progress no longer lists them, or it is finished)", v.Rec.Parent)
			break
		}
		if v.Rec.State == claims.StatePending {
			fmt.Fprintf(&b, "records set aside from %s (restorable once that is finished)", v.Rec.Parent)
			break
		}
		fmt.Fprintf(&b, "released%s", by)
	}
	if !v.Rec.Written.IsZero() {
		fmt.Fprintf(&b, " (written %s)", FmtTime(v.Rec.Written))
	}
	switch {
	case v.ProgErr != nil:
		b.WriteString("; its restore progress is damaged")
	case v.Started():
		b.WriteString("; " + v.Counts(records, known))
	}
	return b.String()
}

// Counts says how far restoring got: "4 delivered, 8 remaining".
func (v *Claim) Counts(records uint64, known bool) string {
	p := &v.Prog
	parts := []string{fmt.Sprintf("%d delivered", p.Delivered)}
	if p.Quarantined > 0 {
		parts = append(parts, fmt.Sprintf("%d quarantined", p.Quarantined))
	}
	if p.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d left by filters", p.Skipped))
	}
	if n := v.Carved(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d carved (their side segment pending: still here)", n))
	}
	if known {
		parts = append(parts, fmt.Sprintf("%d remaining", v.Remaining(records)+v.Aside()))
	}
	return strings.Join(parts, ", ")
}

// ClaimJSON is a segment's record as the command line's --json and the
// console show it.
type ClaimJSON struct {
	Owner       string  `json:"owner"`
	State       string  `json:"state"` // held, released, quarantined
	Written     string  `json:"written,omitempty"`
	Delivered   uint64  `json:"delivered"`
	Quarantined uint64  `json:"quarantined,omitempty"`
	Skipped     uint64  `json:"skipped,omitempty"`
	Remaining   *uint64 `json:"remaining,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// JSON returns the record as ClaimJSON, nil for a nil Claim.
func (v *Claim) JSON(records uint64, known bool) *ClaimJSON {
	if v == nil {
		return nil
	}
	j := &ClaimJSON{Owner: v.Rec.Owner, State: v.Status(), Written: JSONTime(v.Rec.Written),
		Delivered: v.Prog.Delivered, Quarantined: v.Prog.Quarantined, Skipped: v.Prog.Skipped}
	if known {
		n := v.Remaining(records) + v.Aside()
		j.Remaining = &n
	}
	if v.ProgErr != nil {
		j.Error = v.ProgErr.Error()
	}
	return j
}

// Inspector reads the claim records of a store's segments through a
// Claimer, which remembers what it saw of each record so that a claim seen
// unchanged for its lease reads as expired.
type Inspector struct {
	Reader  sink.Reader
	Claimer *claims.Claimer
	// Path names a segment in errors; default AREA/NAME.
	Path func(area sink.Area, name string) string
}

func (in *Inspector) path(area sink.Area, name string) string {
	if in.Path != nil {
		return in.Path(area, name)
	}
	return area.String() + "/" + name
}

// Inspect reads the record of one segment; nil when it has none. Archived
// segments have none (a restorer removes it when it archives); a stale one
// is not shown.
func (in *Inspector) Inspect(ctx context.Context, si sink.Info) (*Claim, error) {
	if si.Area == sink.AreaArchive {
		return nil, nil
	}
	rec, _, err := in.Claimer.Inspect(ctx, si.Name)
	if err != nil {
		return nil, fmt.Errorf("read the claim record of %s: %w", in.path(si.Area, si.Name), err)
	}
	if rec == nil {
		return nil, nil
	}
	return NewClaim(*rec), nil
}

// RecordNames returns the names that have a record; where names the store in
// errors.
func (in *Inspector) RecordNames(ctx context.Context, where fmt.Stringer) (map[string]bool, error) {
	names := map[string]bool{}
	for n, err := range in.Reader.RecordNames(ctx) {
		if err != nil {
			return nil, fmt.Errorf("list the claim records of %s: %w", where, err)
		}
		names[n] = true
	}
	return names, nil
}

// InspectAll reads the records of the segments that have one, by name.
func (in *Inspector) InspectAll(ctx context.Context, where fmt.Stringer, infos []sink.Info) (map[string]*Claim, error) {
	out := map[string]*Claim{}
	if len(infos) == 0 {
		return out, nil
	}
	names, err := in.RecordNames(ctx, where)
	if err != nil {
		return out, err
	}
	for _, si := range infos {
		if !names[si.Name] {
			continue
		}
		v, err := in.Inspect(ctx, si)
		if err != nil {
			return out, err
		}
		if v != nil {
			out[si.Name] = v
		}
	}
	return out, nil
}

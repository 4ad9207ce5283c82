package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// The claims of the command: what ls, stat, cat and quarantine ls show of a
// segment's record (its claim and restore progress, read with
// claims.Claimer.Inspect, never by comparing clocks), and the claims mv and
// restore take through the one claim protocol of package claims.

// defaultLease is the lease of the claims the command takes; --lease
// (hidden) changes it.
const defaultLease = 30 * time.Second

// wrapReader wraps every location's Reader; the tests replace it to count
// the sink operations and interrupt the command at each.
var wrapReader = func(r sink.Reader) sink.Reader { return r }

// cliOwner names this process in claims (a label for people: claims are told
// apart by their random token).
func cliOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("dlqdump-cli@%s-%d", host, os.Getpid())
}

// claimerOf returns this process's Claimer on l: one per location, so that
// what it observed of other holders' records carries from one call to the
// next.
func (a *app) claimerOf(l *location) (*claims.Claimer, error) {
	a.claimMu.Lock()
	defer a.claimMu.Unlock()
	if c := a.claimers[l]; c != nil {
		return c, nil
	}
	c, err := claims.NewClaimer(l.reader, cliOwner(), a.lease, &claims.Options{Logger: a.logger()})
	if err != nil {
		return nil, err
	}
	if a.claimers == nil {
		a.claimers = map[*location]*claims.Claimer{}
	}
	a.claimers[l] = c
	return c, nil
}

// claimView is what a segment's record says: who claimed it last, whether
// the claim is held, released, or kept by a segment moved to quarantine, and
// how far restoring it got.
type claimView struct {
	rec     claims.Record
	prog    claims.Progress
	progErr error // the progress does not parse
}

// status returns "held", "released" or "quarantined".
func (v *claimView) status() string {
	switch {
	case v.rec.Held():
		return "held"
	case v.rec.State == claims.StateQuarantined:
		return "quarantined"
	}
	return "released"
}

// started reports whether the progress says any work was done.
func (v *claimView) started() bool {
	return v != nil && v.progErr == nil && (v.prog.Started() || len(v.prog.Aside) > 0)
}

// handled says what a restore did with the records cat and the like leave
// out ("" when none): "N delivered[, M quarantined]".
func (v *claimView) handled() string {
	if !v.started() || v.prog.Delivered+v.prog.Quarantined == 0 {
		return ""
	}
	s := fmt.Sprintf("%d delivered", v.prog.Delivered)
	if v.prog.Quarantined > 0 {
		s += fmt.Sprintf(", %d quarantined", v.prog.Quarantined)
	}
	return s
}

// aside counts the records set aside before the position and not yet copied
// into a side segment: they are still only in this segment.
func (v *claimView) aside() uint64 {
	var n uint64
	for _, r := range v.prog.Aside {
		n += r.Records()
	}
	return n
}

// remaining counts the records after the position, of records in all: those
// a restore still has to handle.
func (v *claimView) remaining(records uint64) uint64 {
	if v.prog.Done || v.prog.Seq >= records {
		return 0
	}
	return records - v.prog.Seq
}

// skip reports whether record seq was handled already: before the position
// and not among the records set aside (which are still only here).
func (v *claimView) skip(seq uint64) bool {
	if v == nil || v.progErr != nil || seq >= v.prog.Seq && !v.prog.Done {
		return false
	}
	for _, r := range v.prog.Aside {
		if r.Has(seq) {
			return false
		}
	}
	return true
}

// note describes the record of a segment in area in one line, for people:
// records is the segment's record count, known says whether it is.
func (v *claimView) note(area sink.Area, records uint64, known bool) string {
	var b strings.Builder
	// by names the owner; a side segment's record has none.
	by := ""
	if v.rec.Owner != "" {
		by = " by " + v.rec.Owner
	}
	switch v.status() {
	case "held":
		fmt.Fprintf(&b, "claimed%s", by)
	case "quarantined":
		if area == sink.AreaReady {
			b.WriteString("released from quarantine; ")
		}
		fmt.Fprintf(&b, "quarantined%s", by)
	default:
		if v.rec.State == claims.StatePending {
			fmt.Fprintf(&b, "records set aside from %s (restorable once that is finished)", v.rec.Parent)
			break
		}
		fmt.Fprintf(&b, "released%s", by)
	}
	if !v.rec.Written.IsZero() {
		fmt.Fprintf(&b, " (written %s)", fmtTime(v.rec.Written))
	}
	switch {
	case v.progErr != nil:
		b.WriteString("; its restore progress is damaged")
	case v.started():
		b.WriteString("; " + v.counts(records, known))
	}
	return b.String()
}

// counts says how far restoring got: "4 delivered, 8 remaining".
func (v *claimView) counts(records uint64, known bool) string {
	p := &v.prog
	parts := []string{fmt.Sprintf("%d delivered", p.Delivered)}
	if p.Quarantined > 0 {
		parts = append(parts, fmt.Sprintf("%d quarantined", p.Quarantined))
	}
	if p.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d left by filters", p.Skipped))
	}
	if known {
		parts = append(parts, fmt.Sprintf("%d remaining", v.remaining(records)+v.aside()))
	}
	return strings.Join(parts, ", ")
}

// claimJSON is a segment's record in ls --json and quarantine ls --json.
type claimJSON struct {
	Owner       string  `json:"owner"`
	State       string  `json:"state"` // held, released, quarantined
	Written     string  `json:"written,omitempty"`
	Delivered   uint64  `json:"delivered"`
	Quarantined uint64  `json:"quarantined,omitempty"`
	Skipped     uint64  `json:"skipped,omitempty"`
	Remaining   *uint64 `json:"remaining,omitempty"`
	Error       string  `json:"error,omitempty"`
}

func (v *claimView) json(records uint64, known bool) *claimJSON {
	if v == nil {
		return nil
	}
	j := &claimJSON{Owner: v.rec.Owner, State: v.status(), Written: jsonTime(v.rec.Written),
		Delivered: v.prog.Delivered, Quarantined: v.prog.Quarantined, Skipped: v.prog.Skipped}
	if known {
		n := v.remaining(records) + v.aside()
		j.Remaining = &n
	}
	if v.progErr != nil {
		j.Error = v.progErr.Error()
	}
	return j
}

// inspect reads the record of one segment; nil when it has none. Archived
// segments have none (a restorer removes it when it archives); a stale one
// is not shown.
func (a *app) inspect(l *location, si sink.Info) (*claimView, error) {
	if si.Area == sink.AreaArchive {
		return nil, nil
	}
	c, err := a.claimerOf(l)
	if err != nil {
		return nil, err
	}
	rec, _, err := c.Inspect(a.ctx, si.Name)
	if err != nil {
		return nil, fmt.Errorf("read the claim record of %s: %w", l.segPath(si.Area, si.Name), err)
	}
	if rec == nil {
		return nil, nil
	}
	v := &claimView{rec: *rec}
	v.prog, v.progErr = claims.ParseProgress(rec.Progress)
	return v, nil
}

// recordNames returns the names that have a record in l.
func (a *app) recordNames(l *location) (map[string]bool, error) {
	names := map[string]bool{}
	for n, err := range l.reader.RecordNames(a.ctx) {
		if err != nil {
			return nil, fmt.Errorf("list the claim records of %s: %w", l, err)
		}
		names[n] = true
	}
	return names, nil
}

// inspectAll reads the records of the segments that have one.
func (a *app) inspectAll(l *location, infos []sink.Info) (map[string]*claimView, error) {
	out := map[string]*claimView{}
	if len(infos) == 0 {
		return out, nil
	}
	names, err := a.recordNames(l)
	if err != nil {
		return out, err
	}
	for _, si := range infos {
		if !names[si.Name] {
			continue
		}
		v, err := a.inspect(l, si)
		if err != nil {
			return out, err
		}
		if v != nil {
			out[si.Name] = v
		}
	}
	return out, nil
}

// awaitClaims watches the records of segments claimed by others until each
// holder shows it is alive (its record changes: it renewed) or gone (the
// record stays unchanged for the holder's lease, by this process's clock;
// then the claim may be taken over) or released. It returns the segments
// whose claim may now be taken and, by name, the owners of the live ones.
// The first interrupt stops the waiting: what is undecided counts as live.
func (a *app) awaitClaims(l *location, names []string) (free []string, live map[string]string, err error) {
	live = map[string]string{}
	if len(names) == 0 {
		return nil, live, nil
	}
	c, err := a.claimerOf(l)
	if err != nil {
		return nil, live, err
	}
	type watch struct {
		token string
		rev   uint64
		owner string
	}
	watched := map[string]watch{}
	var longest time.Duration
	look := func(name string) (decided bool, err error) {
		rec, alive, err := c.Inspect(a.ctx, name)
		switch {
		case err != nil:
			return true, fmt.Errorf("read the claim record of %s: %w", l.segPath(sink.AreaReady, name), err)
		case rec == nil || !rec.Held() || !alive:
			free = append(free, name)
			return true, nil
		}
		w, seen := watched[name]
		if !seen {
			watched[name] = watch{rec.Token, rec.Rev, rec.Owner}
			longest = max(longest, rec.Lease(c.Lease()))
			return false, nil
		}
		if rec.Token != w.token || rec.Rev != w.rev {
			live[name] = rec.Owner // renewed, or taken by another: alive
			return true, nil
		}
		return false, nil
	}
	pending := slices.Clone(names)
	var errs []error
	decide := func() {
		next := pending[:0]
		for _, n := range pending {
			decided, err := look(n)
			if err != nil {
				errs = append(errs, err)
			}
			if !decided {
				next = append(next, n)
			}
		}
		pending = next
	}
	decide()
	if len(pending) > 0 {
		owners := map[string]bool{}
		for _, n := range pending {
			owners[watched[n].owner] = true
		}
		a.infof("%s claimed by %s: waiting up to %s to see whether the claims are alive (a claim not renewed within its lease is taken over)",
			plural(len(pending), "segment"), strings.Join(slices.Sorted(maps.Keys(owners)), ", "), longest.Round(time.Millisecond))
	}
	// A claim is renewed every third of its lease: look ten times a lease.
	tick := time.NewTicker(max(10*time.Millisecond, min(time.Second, longest/10)))
	defer tick.Stop()
	for len(pending) > 0 {
		select {
		case <-tick.C:
		case <-a.soft.Done():
			for _, n := range pending {
				live[n] = watched[n].owner
			}
			return free, live, errors.Join(errs...)
		}
		decide()
	}
	return free, live, errors.Join(errs...)
}

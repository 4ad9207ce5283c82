package claims

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// How a progress holds its carved runs (Progress.Carve) on the store, so
// that a dlqdump older than carving, which knows neither Carve nor Writing,
// fails safe on it rather than losing them: they are written among the Aside
// runs as runs set aside for quarantine (Quarantine, Reason), marked Carved,
// with a reason of their own, the last of Reasons (carveReason), that says
// what they are. This version reads them back as Carve runs. An older one
// reads them as records set aside for quarantine, and moves them into a
// quarantine segment with that reason (released from quarantine, they are
// restored); or, where they interleave with the other runs in a block (a
// selection taking every other record: runs not apart), it does not trust
// the progress and moves the whole segment to quarantine. Either way no
// record is lost: at worst some are delivered twice (the side segment
// being written may be published as well).

// carveReason is the reason the runs of carved records carry on the store,
// for an older dlqdump, naming the side segments being written.
func carveReason(writing []string) string {
	s := "carved for a restore job by a newer dlqdump, not yet copied into their side segment"
	if len(writing) > 0 {
		s += " (" + strings.Join(writing, ", ") + ")"
	}
	s += ": release them from quarantine to restore them"
	if len(s) > MaxReasonLen {
		s = s[:MaxReasonLen]
	}
	return s
}

// stored returns p as it is written on the store: its Carve runs among the
// Aside ones, in order, marked Carved, as quarantine runs with the last
// reason (carveReason).
func (p *Progress) stored() *Progress {
	if len(p.Carve) == 0 {
		return p
	}
	q := *p
	q.Reasons = append(slices.Clip(p.Reasons), carveReason(p.Writing))
	q.Aside = slices.Clip(p.Aside)
	for _, a := range p.Carve {
		a.Quarantine, a.Reason, a.Carved = true, len(q.Reasons)-1, true
		q.Aside = append(q.Aside, a)
	}
	slices.SortStableFunc(q.Aside, func(a, b Aside) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.From, b.From))
	})
	q.Carve = nil
	return &q
}

// splitCarved takes the runs marked Carved out of Aside into Carve, and their
// reason out of Reasons (stored's inverse).
func (p *Progress) splitCarved() error {
	var aside, carve []Aside
	for _, a := range p.Aside {
		if !a.Carved {
			aside = append(aside, a)
			continue
		}
		if !a.Quarantine || a.Reason != len(p.Reasons)-1 {
			return fmt.Errorf("dlqdump: damaged progress in a claim record: carved run %+v does not carry the last reason", a)
		}
		a.Quarantine, a.Reason, a.Carved = false, 0, false
		carve = append(carve, a)
	}
	if len(carve) == 0 {
		return nil
	}
	p.Aside, p.Carve, p.Reasons = aside, carve, p.Reasons[:len(p.Reasons)-1]
	for _, a := range p.Aside {
		if a.Quarantine && a.Reason >= len(p.Reasons) {
			return fmt.Errorf("dlqdump: damaged progress in a claim record: run %+v carries the carved runs' reason", a)
		}
	}
	return nil
}

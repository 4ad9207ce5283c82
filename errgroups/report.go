package errgroups

import (
	"time"
)

// Report is what dlqdump errors --json prints and the console's error
// groups page shows: the top groups with their counts over time, in bars
// of equal length between the first record and the last.
type Report struct {
	Header string `json:"header"`
	// Records counts the records looked at, Without those of them
	// without the header.
	Records uint64 `json:"records"`
	Without uint64 `json:"without"`
	// Groups counts the groups found; Shown are the largest of them.
	Groups int           `json:"groups"`
	Shown  []GroupReport `json:"shown"`
	// From is the start of the first bar; StepS the seconds of a bar.
	From  time.Time `json:"from"`
	StepS int64     `json:"step_s"`
	Bars  int       `json:"bars"`
}

// GroupReport is a group in a Report.
type GroupReport struct {
	*Group
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	Counts []uint64  `json:"counts"` // per bar
	// Select is the selection of the group's records: what "replay
	// this group" restores ("" for Other).
	Select string `json:"select"`
}

// Report returns the top largest groups (0: all) and their counts in at
// most bars bars (0: 48).
func (c *Counter) Report(top, bars int) Report {
	if bars <= 0 {
		bars = 48
	}
	r := Report{Header: c.header, Records: c.records, Without: c.without}
	gs := c.Groups()
	r.Groups = len(gs)
	if top > 0 && len(gs) > top {
		gs = gs[:top]
	}
	var lo, hi int64
	first := true
	for _, g := range gs {
		for s := range g.steps {
			if first || s < lo {
				lo = s
			}
			if first || s > hi {
				hi = s
			}
			first = false
		}
	}
	r.Shown = make([]GroupReport, 0, len(gs))
	if len(gs) == 0 {
		return r
	}
	span := hi - lo + 1
	per := (span + int64(bars) - 1) / int64(bars) // steps per bar
	r.Bars = int((span + per - 1) / per)
	r.StepS = per * int64(Step/time.Second)
	r.From = time.Unix(0, lo*int64(Step)).UTC()
	for _, g := range gs {
		gr := GroupReport{Group: g, First: g.First, Last: g.Last, Counts: make([]uint64, r.Bars), Select: c.Select(g)}
		for s, n := range g.steps {
			gr.Counts[(s-lo)/per] += n
		}
		r.Shown = append(r.Shown, gr)
	}
	return r
}

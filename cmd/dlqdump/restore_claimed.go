package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/sink"
)

// restoreClaimed deals with the segments a pass left because other
// restorers held their claims. A process sees such a claim for the first
// time, so it cannot tell a live holder from a dead one (a restore or mv that
// was killed) at once; it watches the claims until each is renewed (alive:
// left to its holder) or stays unchanged for its holder's lease (gone), and
// restores the latter in a second pass, whose report is added to rep. The
// Restorer takes those claims over by the same rule, from its own
// observation.
func (a *app) restoreClaimed(l *location, r *dlqdump.Restorer, ctx context.Context, opts dlqdump.RunOptions, rep *dlqdump.Report) error {
	if opts.Limit > 0 && rep.Delivered+rep.Quarantined >= opts.Limit {
		return nil
	}
	ready, err := a.list(l, []sink.Area{sink.AreaReady}, nil)
	if err != nil {
		return err
	}
	if opts.Segments != nil {
		ready = slices.DeleteFunc(ready, func(si sink.Info) bool { return !slices.Contains(opts.Segments, si.Name) })
	}
	views, err := a.inspectAll(l, ready)
	if err != nil {
		return err
	}
	var held []string
	for _, si := range ready {
		if v := views[si.Name]; v != nil && v.Rec.Held() {
			held = append(held, si.Name)
		}
	}
	free, live, err := a.awaitClaims(l, held)
	if err != nil {
		a.warnf("%v", err)
	}
	if len(live) > 0 {
		var s []string
		for _, n := range slices.Sorted(maps.Keys(live)) {
			s = append(s, fmt.Sprintf("%s (by %s)", n, live[n]))
		}
		a.infof("left %s claimed by live restorers: %s", plural(len(live), "segment"), strings.Join(s, ", "))
	}
	if len(free) == 0 || a.interrupted() {
		rep.Claimed = len(live)
		return nil
	}
	more := opts
	more.Segments = free
	if opts.Limit > 0 {
		more.Limit = opts.Limit - rep.Delivered - rep.Quarantined
	}
	rep2, err := r.Run(ctx, more)
	addReport(rep, &rep2)
	rep.Claimed = rep2.Claimed + len(live)
	return err
}

// addReport adds the counts of b to a.
func addReport(a, b *dlqdump.Report) {
	a.Segments += b.Segments
	a.Delivered += b.Delivered
	a.Retried += b.Retried
	a.Quarantined += b.Quarantined
	a.Skipped += b.Skipped
	a.Bytes += b.Bytes
	a.QuarantinedSegments += b.QuarantinedSegments
	a.DeletedSegments += b.DeletedSegments
	a.SideSegments += b.SideSegments
	a.DamagedBlocks += b.DamagedBlocks
	a.ReleasedDamagedBlocks += b.ReleasedDamagedBlocks
	a.Completed += b.Completed
	a.Gone += b.Gone
	a.NoKeySegments += b.NoKeySegments
	a.OtherVersionSegments += b.OtherVersionSegments
	if a.ByReason == nil {
		a.ByReason = map[string]uint64{}
	}
	for k, n := range b.ByReason {
		a.ByReason[k] += n
	}
}

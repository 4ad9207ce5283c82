package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func newSummarizeCmd(a *app) *cobra.Command {
	var area string
	cmd := &cobra.Command{
		Use:   "summarize LOCATION [SEGMENT...]",
		Short: "Give segments written without a summary one, so that selections can skip them",
		Long: `Give each segment written without a summary (before summaries, or by a Queue
with NoSummary; all, or the named ones) a summary of its records: what
selections (cat --select, restore, jobs, the console) use to skip segments
and blocks that cannot hold a record they select (see docs/SELECT.md).
Segments are immutable: each is copied, block for block at the same
offsets, into a new segment with a new header and the summary, published
under a new name (the same time, so it keeps its place), and the old one is
deleted. Every record keeps its ID. An encrypted segment needs an identity
(--identity, $DLQDUMP_IDENTITY, $DLQDUMP_AWS_KMS): its records are read to
be summarized. A damaged segment is left as it is (see verify --salvage).

A ready segment is claimed first, as rewrap does, and its restore progress
moves with it; an interrupted summarize never delivers a record twice.
Archived segments are summarized too; quarantined ones are not (release
them first). Readers that predate summaries refuse segments that carry one.`,
		Example: `  dlqdump summarize /var/lib/app/dlq
  dlqdump summarize s3://dead-letters/orders/ --area archive --identity dlq.key`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if a.lease < claims.MinLease {
				return usageErrorf("--lease %s: want at least %s", a.lease, claims.MinLease)
			}
			areas, err := areasFlag(cmd.Flags(), area, args[1:], "all")
			if err != nil {
				return err
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			infos, err := a.list(l, areas, args[1:])
			if err != nil {
				return err
			}
			return a.addSummaries(l, infos)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&area, "area", "all", "ready, archive or all (quarantined segments are not summarized)")
	fl.DurationVar(&a.lease, "lease", defaultLease, "claim lease on each ready segment, renewed every third of it")
	_ = fl.MarkHidden("lease")
	return cmd
}

// errHasSummary says a segment has a summary already.
var errHasSummary = errors.New("has a summary")

// addSummaries summarizes each segment of infos, reporting each.
func (a *app) addSummaries(l *location, infos []sink.Info) error {
	var done, had, failed int
	var summarized []string
	defer func() {
		if done > 0 {
			a.logChange(l, changelog.ActionSummarize, scopeOf("segments", summarized), fmt.Sprintf("summarized %s", plural(done, "segment")), nil)
		}
	}()
	for _, si := range infos {
		if a.interrupted() {
			break
		}
		name, err := a.summarizeOne(l, si)
		switch {
		case errors.Is(err, errHasSummary):
			had++
		case err != nil:
			failed++
			a.warnf("%s: not summarized: %v", l.segPath(si.Area, si.Name), err)
		default:
			done++
			summarized = append(summarized, si.Name)
			a.printOut(fmt.Sprintf("summarized %s -> %s", si.Name, name))
		}
	}
	a.infof("summarized %s of %s; %s had one", plural(done, "segment"), l, plural(had, "segment"))
	if failed > 0 {
		return fmt.Errorf("%s not summarized", plural(failed, "segment"))
	}
	return nil
}

// summarizeOne gives one segment a summary and returns the name of its
// copy: for a ready segment under a claim, the copy published pending on
// the original which names it (as rewrap does, so that a restorer taking
// the original over finishes it once the copy is there), then the original
// removed.
func (a *app) summarizeOne(l *location, si sink.Info) (string, error) {
	if si.Area == sink.AreaQuarantine {
		return "", fmt.Errorf("quarantined: release it first (dlqdump quarantine release)")
	}
	if has, err := a.hasSummary(l, si); err != nil || has {
		if has {
			return "", errHasSummary
		}
		return "", err
	}
	if si.Area == sink.AreaArchive {
		var newName string
		err := a.summarizeCopy(l, si, func(name string) (sink.SegmentWriter, error) { return l.reader.Create(a.ctx, si.Area, name) },
			func(sw sink.SegmentWriter, c rewrapped) error { newName = c.name; return sw.Commit(a.ctx) })
		if err != nil {
			return "", err
		}
		if err := l.reader.Delete(a.ctx, si.Area, si.Name); err != nil && !errors.Is(err, sink.ErrNotFound) {
			return newName, fmt.Errorf("the copy %s is published, but deleting the original failed: %w", newName, err)
		}
		return newName, nil
	}
	ctx := a.ctx
	claimer, err := a.claimerOf(l)
	if err != nil {
		return "", err
	}
	cl, err := claimer.Claim(ctx, si.Name)
	if err != nil {
		return "", err
	}
	keep := claims.Keep(ctx, cl, a.logger())
	ended := false
	defer func() {
		keep.Stop()
		if !ended && !keep.Lost() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			defer cancel()
			_ = cl.Release(rctx)
		}
	}()
	prog, err := claims.ParseProgress(cl.Progress())
	switch {
	case err != nil:
		return "", err
	case len(prog.Aside) > 0 || prog.Done:
		return "", fmt.Errorf("a restore of it is finishing (records set aside, or done): restore it first")
	}
	finish := func() error {
		keep.Stop()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := cl.Finish(fctx, claims.Destination{Delete: true}); err != nil {
			return fmt.Errorf("the copy %s is published, but removing the original failed (a restorer taking it over removes it): %w", prog.Successor, err)
		}
		ended = true
		return nil
	}
	if prog.Successor != "" {
		// An earlier summarize or rewrap published its copy, or did not.
		if err := a.checkProgress(l, si, cl.Progress()); err != nil {
			return "", err
		}
		if f, err := l.reader.Open(ctx, sink.AreaReady, prog.Successor); err == nil {
			f.Close()
			return prog.Successor, finish()
		}
	}
	var newName string
	stage := func(name string) (sink.SegmentWriter, error) {
		return l.reader.Create(ctx, sink.AreaStaging, cl.StagedName(name))
	}
	marshal := func(p claims.Progress, key []byte, id segment.ID) []byte {
		if key == nil {
			return p.Marshal()
		}
		return p.MarshalSigned(key, id)
	}
	publish := func(sw sink.SegmentWriter, c rewrapped) error {
		if !prog.Empty() && c.key != nil {
			if err := claims.VerifyProgress(cl.Progress(), c.key, c.origID); err != nil {
				return fmt.Errorf("%w: restore it first (a restorer moves it to quarantine)", err)
			}
		}
		// The copy's record first, pending on the original, with the
		// progress: its blocks are at the same offsets.
		p := prog
		p.Successor = ""
		rec := claims.Record{V: claims.Version, Rev: 1, State: claims.StatePending, Parent: si.Name, Written: time.Now().UTC()}
		if p.Started() {
			rec.Progress = marshal(p, c.key, c.copyID)
		}
		if err := a.putRecord(l, c.name, &rec); err != nil {
			return err
		}
		if err := sw.Commit(ctx); err != nil {
			return err
		}
		prog.Successor = c.name
		newName = c.name
		return keep.Publish(ctx, claims.Publication{Staged: cl.StagedName(c.name), Name: c.name, Area: sink.AreaReady}, marshal(prog, c.key, c.origID))
	}
	if err := a.summarizeCopy(l, si, stage, publish); err != nil {
		return "", err
	}
	return newName, finish()
}

// hasSummary reports whether a segment has a summary.
func (a *app) hasSummary(l *location, si sink.Info) (bool, error) {
	f, err := l.reader.Open(a.ctx, si.Area, si.Name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
	if err != nil {
		return false, err
	}
	return sr.Footer() != nil && sr.Footer().SummaryBytes > 0, nil
}

// summarizeCopy writes a copy of a segment with a summary into the segment
// create starts for the copy's name, and calls publish to publish it
// (publish commits sw), then reads the copy back: its blocks must verify
// and its summary read.
func (a *app) summarizeCopy(l *location, si sink.Info, create func(name string) (sink.SegmentWriter, error), publish func(sw sink.SegmentWriter, c rewrapped) error) error {
	ctx := a.ctx
	f, err := l.reader.Open(ctx, si.Area, si.Name)
	if err != nil {
		return err
	}
	defer f.Close()
	ro, err := a.readerOptions(si.Name)
	if err != nil {
		return err
	}
	sr, err := segment.NewReaderContext(ctx, f, f.Size(), ro)
	if err != nil {
		return keyHint(err)
	}
	if sr.Header().Encrypted && sr.DataKey() == nil {
		return keyHint(sr.KeyError())
	}
	created := sr.Header().Created
	id := segment.NewID(created)
	name := segment.FileName(created, id)
	sw, err := create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", l.segPath(si.Area, name), err)
	}
	c := rewrapped{name: name, origID: sr.Header().ID, copyID: id}
	if dk := sr.DataKey(); dk != nil {
		c.key = dk.Key
	}
	err = segment.AddSummary(sw, sr, id, created)
	if err == nil {
		err = publish(sw, c)
	}
	if err != nil {
		_ = sw.Abort()
		return err
	}
	cf, err := l.reader.Open(ctx, si.Area, name)
	if err != nil {
		return fmt.Errorf("read back %s: %w", l.segPath(si.Area, name), err)
	}
	defer cf.Close()
	cr, err := segment.NewReaderContext(ctx, cf, cf.Size(), ro)
	if err == nil {
		var s *segment.Summary
		if s, err = cr.Summary(); err == nil && s == nil {
			err = errors.New("no summary")
		}
	}
	if err != nil {
		return fmt.Errorf("read back %s: %w", l.segPath(si.Area, name), err)
	}
	return nil
}

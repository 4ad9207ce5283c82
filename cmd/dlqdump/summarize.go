package main

import (
	"errors"
	"fmt"

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
// copy (see replace).
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
	return a.replace(l, si, func(create func(string) (sink.SegmentWriter, error), publish func(sink.SegmentWriter, segCopy) error) error {
		return a.summarizeCopy(l, si, create, publish)
	})
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
func (a *app) summarizeCopy(l *location, si sink.Info, create func(name string) (sink.SegmentWriter, error), publish func(sw sink.SegmentWriter, c segCopy) error) error {
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
	c := segCopy{name: name, origID: sr.Header().ID, copyID: id}
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

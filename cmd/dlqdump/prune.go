package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

type pruneFlags struct {
	area        string
	maxAge      time.Duration
	maxSegments int
	maxBytes    string
	dryRun      bool
	now         string
	sel         string
	lease       time.Duration
}

func newPruneCmd(a *app) *cobra.Command {
	var f pruneFlags
	cmd := &cobra.Command{
		Use:   "prune LOCATION --area AREA [--max-age D] [--max-segments N] [--max-bytes SIZE]",
		Short: "Remove expired segments of an area (retention), saying which and why",
		Long: `Enforce a retention on one area of a dump, as a Restorer with
Config.Retention does: segments whose newest record is older than --max-age,
then the oldest segments while the area holds more than --max-segments or
more than --max-bytes, are removed. Every removed segment is printed with its
records, oldest and newest record and the rule that removed it; run with
--dry-run first to see what would go: the dry run decides as the run does. A
ready segment is claimed before it is removed, so one being restored is left
alone (and counted), and no newer segment is removed in its place. A segment
whose removal failed but took effect is still counted. Expiring ready
segments drops dead letters that were never restored: the archive and the
quarantine are the usual areas to prune.

--now TIME measures ages from TIME instead of the current time, in the
forms --since takes (RFC 3339, a date, or a duration ago): to try an age
limit, e.g. --max-age 720h --now 2026-04-01 --dry-run lists what will have
expired by then. A TIME after the current time removes segments not yet
expired, so it is taken only with --dry-run.

--select EXPR (the selection language, docs/SELECT.md) narrows what is
removed to the segments it selects whole: with limits, a segment due is
removed only if every record it holds (but those restored already) is
selected; without limits, every segment of the area it selects whole is
removed. A segment holding a record the selection does not select is left
and counted, so prune never removes a record the selection leaves. Time,
area and segment parts are decided by a segment's footer; the others read
its records. To take single records out of the ready area, see dlqdump
discard.

Every run that removes something is written to the store's change log
(dlqdump log), with --reason.

On S3 prune works by listing alone; a bucket lifecycle rule on the archive/
prefix can do the same without this command, but removes silently.`,
		Example: `  dlqdump prune /var/lib/app/dlq --area archive --max-age 30d --dry-run
  dlqdump prune /var/lib/app/dlq --area quarantine --select 'source = loadtest' --reason "load test leftovers"
  dlqdump prune /var/lib/app/dlq --area quarantine --max-age 7d --select 'quarantine ~ discarded'
  dlqdump prune s3://dead-letters/orders/ --area quarantine --max-bytes 10GiB`,
		Args: argsRange(1, 1, "LOCATION"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.prune(args[0], &f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.area, "area", "", "area to prune: archive, quarantine or ready (required)")
	durationVar(fl, &f.maxAge, "max-age", 0, "remove segments whose newest record is older than this, e.g. 30d or 720h (0: no limit)")
	fl.IntVar(&f.maxSegments, "max-segments", 0, "keep at most this many segments, removing the oldest (0: no limit)")
	fl.StringVar(&f.maxBytes, "max-bytes", "", "keep at most this many bytes, removing the oldest segments, e.g. 10GiB (default: no limit)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would be removed; change nothing")
	fl.StringVar(&f.sel, "select", "", `remove only segments this expression selects whole (docs/SELECT.md), e.g. 'source = loadtest'`)
	fl.StringVar(&f.now, "now", "", "measure ages from this time (forms of --since; a later time than now only with --dry-run)")
	durationVar(fl, &f.lease, "lease", 30*time.Second, "claim lease on each ready segment removed, renewed every third of it")
	_ = fl.MarkHidden("lease")
	return cmd
}

func (a *app) prune(loc string, f *pruneFlags) error {
	if f.area == "" {
		return usageErrorf("--area is required: archive, quarantine or ready")
	}
	area, err := sink.ParseArea(f.area)
	if err != nil {
		return usageErrorf("--area %q: want archive, quarantine or ready", f.area)
	}
	var lim dlqdump.Limits
	lim.MaxAge, lim.MaxSegments = f.maxAge, f.maxSegments
	if f.maxBytes != "" {
		if lim.MaxBytes, err = dlqdump.ParseMemorySize(f.maxBytes); err != nil || lim.MaxBytes == 0 {
			return usageErrorf("--max-bytes %q: want a size such as 512MiB or 10GiB", f.maxBytes)
		}
	}
	now := time.Now()
	at, err := parseWhen("--now", f.now, now)
	switch {
	case err != nil:
		return err
	case at.After(now) && !f.dryRun:
		return usageErrorf("--now %s is later than the current time: it would remove segments not yet expired; give --dry-run to try it", f.now)
	case f.maxAge < 0 || f.maxSegments < 0:
		return usageErrorf("--max-age and --max-segments: want 0 (no limit) or more")
	case lim.MaxAge == 0 && lim.MaxSegments == 0 && lim.MaxBytes == 0 && f.sel == "":
		return usageErrorf("give at least one of --max-age, --max-segments, --max-bytes and --select")
	}
	sel, err := parseSelect("--select", f.sel, now)
	if err != nil {
		return err
	}
	l, err := a.open(loc, true)
	if err != nil {
		return err
	}
	cfg := &dlqdump.Config{Reader: l.reader, Decoder: decoder.Fallthrough{}, Queue: nowhere{}, Logger: a.logger(), Owner: cliOwner(), Lease: f.lease, MaxRecordSize: a.recordSize.size}
	switch area {
	case sink.AreaReady:
		cfg.Retention.Ready = lim
	case sink.AreaQuarantine:
		cfg.Retention.Quarantine = lim
	default:
		cfg.Retention.Archive = lim
	}
	r, err := dlqdump.NewRestorer(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := r.Prune(a.ctx, dlqdump.PruneOptions{DryRun: f.dryRun, Now: at, Select: sel, Areas: []dlqdump.Area{area}})
	verb := "removed"
	if f.dryRun {
		verb = "would remove"
	}
	var records uint64
	var bytes int64
	for _, ex := range rep.Expired {
		records += ex.Records
		bytes += ex.Bytes
		fmt.Fprintf(a.stdout, "%s %s/%s: %d records from %s to %s, %s (%s)\n", verb, ex.Area, ex.Name, ex.Records,
			ex.Oldest.UTC().Format(time.RFC3339), ex.Newest.UTC().Format(time.RFC3339), humanBytes(ex.Bytes), ex.Rule)
	}
	fmt.Fprintf(a.stdout, "%s %s, %s, %s", verb, plural(len(rep.Expired), "segment"), plural(records, "record"), humanBytes(bytes))
	if rep.Claimed > 0 {
		fmt.Fprintf(a.stdout, "; left %s due but being restored", plural(rep.Claimed, "segment"))
	}
	if rep.Unselected > 0 {
		fmt.Fprintf(a.stdout, "; left %s holding records --select does not select", plural(rep.Unselected, "segment"))
	}
	fmt.Fprintln(a.stdout)
	if !f.dryRun && len(rep.Expired) > 0 {
		a.logChange(l, changelog.ActionPrune, pruneScope(area, f, sel), fmt.Sprintf("removed %s, %s, %s", plural(len(rep.Expired), "segment"),
			plural(records, "record"), humanBytes(bytes)), err)
	}
	return err
}

// pruneScope says what a prune applied to, for the change log.
func pruneScope(area sink.Area, f *pruneFlags, sel *selection.Selection) string {
	s := "area " + area.String()
	if f.maxAge > 0 {
		s += ", max-age " + fmtDuration(f.maxAge)
	}
	if f.maxSegments > 0 {
		s += fmt.Sprintf(", max-segments %d", f.maxSegments)
	}
	if f.maxBytes != "" {
		s += ", max-bytes " + f.maxBytes
	}
	if !sel.IsAll() {
		s += ", select " + sel.String()
	}
	return s
}

// nowhere is the destination of a Restorer that only prunes.
type nowhere struct{}

func (nowhere) Enqueue(any) error { return fmt.Errorf("dlqdump prune delivers nothing") }

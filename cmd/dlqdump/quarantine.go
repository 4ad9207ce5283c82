package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

func newQuarantineCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "List quarantined segments and release them for restoring",
		Long: `The quarantine area holds what a restorer set aside instead of deleting it:
whole segments (of another data Version, or damaged) with the reason, and
segments of single records (refused by the destination MaxAttempts times,
undecodable, replayed too often), each record with a "quarantine" header
saying why and an "origin" header naming the segment and record it came from.`,
		Args: argsRange(0, 0, "a subcommand: ls or release"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("%s: want a subcommand: ls or release", cmd.CommandPath())
		},
	}
	cmd.AddCommand(newQuarantineLsCmd(a), newQuarantineReleaseCmd(a))
	return cmd
}

func newQuarantineLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls LOCATION",
		Short: "List quarantined segments with the reasons",
		Long: `List the quarantined segments, oldest first, with their records, time range
and reason: the segment's own reason when it was moved aside whole, else the
reasons its records carry (the "quarantine" header), most frequent first.

A segment that a restorer moved to quarantine after delivering part of it
(it had damaged blocks, say) keeps its restore progress in its claim
record: RECORDS counts only the records not delivered, the reason starts
with how many were, and releasing it resumes after them, so that none is
delivered twice.

With --json, one object per segment and line:
  {"name":"...","size":1234,"records":3,"first":"...","last":"...",
   "reason":"version 2.0.0.0, restorer expects 1.0.0.0",
   "record_reasons":{"refused by the destination: ...":3},
   "claim":{"owner":"...","state":"quarantined","delivered":985,...}}
(claim only for a segment with a claim record; see dlqdump ls --help).

Listing needs no key: for an encrypted segment that no identity given
unwraps, RECORDS, FIRST and LAST come from its block headers, the reasons
its records carry are not read, and --json says "sealed":true.`,
		Example: `  dlqdump quarantine ls /var/lib/app/dlq
  dlqdump quarantine ls s3://dead-letters/orders/ --json`,
		Args: argsRange(1, 1, "LOCATION"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			infos, err := a.list(l, []sink.Area{sink.AreaQuarantine}, nil)
			if err != nil {
				return err
			}
			return a.quarantineLs(l, infos, asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per segment and line")
	return cmd
}

type quarantineJSON struct {
	Name          string             `json:"name"`
	Size          int64              `json:"size"`
	Records       uint64             `json:"records"`
	First         string             `json:"first,omitempty"`
	Last          string             `json:"last,omitempty"`
	Reason        string             `json:"reason,omitempty"`
	RecordReasons map[string]uint64  `json:"record_reasons,omitempty"`
	Damage        []string           `json:"damage,omitempty"`
	Claim         *inspect.ClaimJSON `json:"claim,omitempty"`
	// Sealed is set for an encrypted segment no identity given unwraps:
	// its counts and times come from its block headers, and the reasons
	// its records carry are not read.
	Sealed bool `json:"sealed,omitempty"`
}

func (a *app) quarantineLs(l *location, infos []sink.Info, asJSON bool) error {
	claimed, err := a.inspectAll(l, infos)
	if err != nil {
		return err
	}
	t := newTable(1)
	t.add("NAME", "RECORDS", "FIRST", "LAST", "REASON")
	var failed, damaged int
	w := a.walker(l)
	for _, si := range infos {
		j := quarantineJSON{Name: si.Name, Size: si.Size, Reason: si.Reason}
		cv := claimed[si.Name]
		q, err := w.ScanQuarantined(a.ctx, si, cv, func(err error) {
			j.Damage = append(j.Damage, err.Error())
			a.warnf("damage: %v", err)
		})
		if err != nil {
			if a.interrupted() {
				return err
			}
			failed++
			a.warnf("%v", err)
		}
		if len(j.Damage) > 0 {
			damaged++
		}
		j.Records, j.RecordReasons, j.Sealed = q.Records, q.Reasons, q.Sealed
		first, last := q.First(), q.Last()
		if asJSON {
			j.First, j.Last = jsonTime(first), jsonTime(last)
			if cv != nil {
				j.Claim = cv.JSON(j.Records, false)
			}
			if len(j.RecordReasons) == 0 {
				j.RecordReasons = nil
			}
			if err := jsonLine(a.stdout, j); err != nil {
				return err
			}
			continue
		}
		reason := reasonText(si.Reason, j.RecordReasons, j.Records)
		if j.Sealed && si.Reason == "" {
			reason = "(encrypted: the reasons are in its records; give --identity to read them)"
		}
		if cv.Started() {
			reason = fmt.Sprintf("(%s before it was quarantined) %s", cv.Counts(0, false), reason)
		}
		t.add(si.Name, strconv.FormatUint(j.Records, 10), fmtTime(first), fmtTime(last), reason)
	}
	if !asJSON {
		if len(infos) == 0 {
			a.infof("no quarantined segments in %s", l)
		} else if err := t.write(a.stdout); err != nil {
			return err
		}
	}
	return readOutcome(failed, damaged, "")
}

// reasonText summarises why a segment is quarantined, on one line.
func reasonText(segReason string, recReasons map[string]uint64, records uint64) string {
	if segReason != "" {
		return oneLine(segReason)
	}
	if len(recReasons) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(recReasons))
	var with uint64
	for k, n := range recReasons {
		keys = append(keys, k)
		with += n
	}
	slices.SortFunc(keys, func(x, y string) int {
		if c := cmp.Compare(recReasons[y], recReasons[x]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	s := fmt.Sprintf("%d× %s", recReasons[keys[0]], oneLine(keys[0]))
	if len(keys) > 1 {
		s += fmt.Sprintf(" (+%s)", plural(len(keys)-1, "other reason"))
	}
	if with < records {
		s += fmt.Sprintf(" (+%d without a reason)", records-with)
	}
	return s
}

// oneLine flattens line breaks and shortens s to 120 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 120 {
		s = string(r[:117]) + "..."
	}
	return s
}

func newQuarantineReleaseCmd(a *app) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "release LOCATION [SEGMENT...|--all]",
		Short: "Move quarantined segments back to ready",
		Long: `Move the named quarantined segments (or --all of them) back to the ready
area, where the next restore picks them up; their quarantine reason is
dropped. Release a segment once what made it fail is fixed: a segment of
another data Version is quarantined again by a restorer that still does not
accept that version.

A segment that a restorer quarantined after delivering part of it keeps its
restore progress (its claim record), so the next restore resumes after the
records delivered already. A segment of the same name already ready is
never replaced: that is an error naming both.`,
		Example: `  dlqdump quarantine release /var/lib/app/dlq 20261122T101500.123456789Z-0123456789abcdef.dlq
  dlqdump quarantine release s3://dead-letters/orders/ --all`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...|--all]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			names := args[1:]
			switch {
			case all && len(names) > 0:
				return usageErrorf("give segment names or --all, not both")
			case !all && len(names) == 0:
				return usageErrorf("give the segments to release, or --all")
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			infos, err := a.list(l, []sink.Area{sink.AreaQuarantine}, names)
			if err != nil {
				return err
			}
			return a.release(l, infos)
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "release every quarantined segment")
	return cmd
}

// release moves quarantined segments to the ready area, never replacing a
// ready segment; their records (claim and restore progress) stay as they
// are, so a restore resumes where the segment was left.
func (a *app) release(l *location, infos []sink.Info) error {
	var failed []error
	released := 0
	defer func() {
		var err error
		if len(failed) > 0 {
			err = errors.Join(failed...)
		}
		if released > 0 { // a refused release changed nothing
			names := make([]string, len(infos))
			for i, si := range infos {
				names[i] = si.Name
			}
			a.logChange(l, changelog.ActionRelease, scopeOf("quarantined segments", names),
				fmt.Sprintf("released %s of %d", plural(released, "segment"), len(infos)), err)
		}
	}()
	for _, si := range infos {
		if a.interrupted() {
			break
		}
		c, err := a.claimerOf(l)
		if err == nil {
			err = inspect.Release(a.ctx, l.reader, c, si.Name, l.segPath)
		}
		if err != nil {
			if a.interrupted() && errors.Is(err, context.Canceled) {
				return err
			}
			failed = append(failed, err)
			a.warnf("%v", err)
			continue
		}
		released++
		if !a.quiet {
			a.printOut("released " + si.Name)
		}
	}
	a.infof("released %s of %d in %s", plural(released, "segment"), len(infos), l)
	if len(failed) > 0 {
		return fmt.Errorf("%s of %d not released", plural(len(failed), "segment"), len(infos))
	}
	return nil
}

package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/segment"
)

// Per-record actions: replay delivers a few records now, discard sets them
// aside into the quarantine with who and why. Both are passes of a Restorer
// over the records' IDs (a selection "id in (...)"): each segment holding
// one is claimed, only the blocks holding them are read, and what the pass
// does is kept in the segment's claim record, so a replay that is killed
// delivers at most a block's records again, as any restore.

// parseIDs parses record IDs given as arguments.
func parseIDs(args []string) ([]segment.RecordID, error) {
	ids := make([]segment.RecordID, 0, len(args))
	for _, s := range args {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			id, err := dlqdump.ParseRecordID(part)
			if err != nil {
				return nil, usageErrorf("record ID %q: %v (IDs look like 2c3d4e5f60718293a4b5c6d1-42: dlqdump cat prints them)", part, err)
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func newReplayCmd(a *app) *cobra.Command {
	var f restoreFlags
	cmd := &cobra.Command{
		Use:   "replay LOCATION ID... [--to URL]",
		Short: "Deliver a few records now, by their IDs, to stdout or an HTTP endpoint",
		Long: `Deliver the ready records with these IDs (as dlqdump cat, stat --by and the
console show them; several may be given, or separated by commas) now, out of
their turn, exactly as restore delivers records: to stdout as JSON lines, or
POSTed to --to URL, and then removed from the dump (--archive: kept in the
archive area). --select narrows it further; without IDs, --select alone
says what to replay.

Each segment holding one of the records is claimed, as by any restorer, and
only the blocks holding them are read; the rest of the segment stays ready,
untouched, for the next restore. A replay that is interrupted keeps its
place; one that is killed delivers at most the records of one block again.
A record the endpoint refuses goes to the quarantine with the reason, never
lost.

The replay is written to the store's change log (dlqdump log) with who
(--actor, else the OS user and host), the IDs and --reason. An ID that is
not in the ready area (restored already, discarded, quarantined) is not
delivered: the command says how many were, and exits 1 when none was.`,
		Example: `  dlqdump replay /var/lib/app/dlq 2c3d4e5f60718293a4b5c6d1-42 --to http://orders.internal:8080/redrive --reason "INC-1234 fixed"
  dlqdump replay s3://dead-letters/orders/ 2c3d4e5f60718293a4b5c6d1-42,2c3d4e5f60718293a4b5c6d1-43 > replayed.jsonl`,
		Args: argsRange(1, -1, "LOCATION ID..."),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			if len(ids) == 0 && f.ff.sel == "" {
				return usageErrorf("give the IDs of the records to replay, or --select")
			}
			f.ids, f.action = ids, changelog.ActionReplay
			return a.restore(args[0], nil, &f)
		}),
	}
	f.register(cmd.Flags())
	return cmd
}

// logRestore writes a restore or replay that did something to the change
// log.
func (a *app) logRestore(l *location, f *restoreFlags, flt *filter, names []string, rep *dlqdump.Report, runErr error) {
	if f.dryRun || rep.Delivered+rep.Quarantined+uint64(rep.QuarantinedSegments) == 0 {
		return
	}
	action := f.action
	if action == "" {
		action = changelog.ActionRestore
	}
	var scope []string
	switch {
	case len(f.ids) > 0 && f.ff.onlyIDs():
		scope = append(scope, idsScope(f.ids))
	case !flt.sel.IsAll():
		scope = append(scope, "select "+flt.sel.String())
	}
	if len(names) > 0 {
		scope = append(scope, scopeOf("segments", names))
	}
	if len(scope) == 0 {
		scope = append(scope, "every ready record")
	}
	dest := f.to
	if dest == "" {
		dest = "stdout"
	}
	result := fmt.Sprintf("delivered %s to %s", plural(rep.Delivered, "record"), dest)
	if rep.Quarantined > 0 {
		result += fmt.Sprintf(", quarantined %s", plural(rep.Quarantined, "record"))
	}
	if f.limit() > 0 {
		result += fmt.Sprintf(" (limit %d)", f.limit())
	}
	a.logChange(l, action, strings.Join(scope, ", "), result, runErr)
}

func (f *restoreFlags) limit() uint64 { return f.ff.limit }

// onlyIDs reports whether no filter but record IDs was given.
func (f *filterFlags) onlyIDs() bool {
	return f.sel == "" && f.since == "" && f.until == "" && len(f.where) == 0
}

// idsScope names records by their IDs for the change log, as the console
// does.
func idsScope(ids []segment.RecordID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return "records " + strings.Join(s, ", ")
}

func newDiscardCmd(a *app) *cobra.Command {
	var (
		ff     filterFlags
		dryRun bool
		lease  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "discard LOCATION ID... --reason WHY",
		Short: "Set records aside into the quarantine, by their IDs, with who and why: never replayed, restorable",
		Long: `Take the ready records with these IDs (or those --select selects) out of the
replay: each is written to the quarantine area, its "quarantine" header
saying "discarded: by WHO: WHY", and removed from the ready area. Nothing is
delivered and nothing is deleted: dlqdump quarantine ls shows them, dlqdump
quarantine release makes them ready again, and the quarantine's retention
(dlqdump prune --area quarantine, or Config.Retention.Quarantine) removes
them when it expires them; dlqdump prune --area quarantine --select
'quarantine ~ discarded' removes only discarded ones. --reason is required:
it goes into every record's header and into the store's change log, with
who (--actor, else the OS user and host).

Each segment holding one of the records is claimed, as by any restorer, and
only the blocks holding them are read; its other records stay ready. The
records are copied into a quarantine segment before their segment's claim
record says they are gone, so an interrupted or killed discard loses
nothing: run it again, and it goes on where it stopped. --dry-run counts
what would be discarded.`,
		Example: `  dlqdump discard /var/lib/app/dlq 2c3d4e5f60718293a4b5c6d1-42 --reason "duplicate of ord-7, refunded by hand"
  dlqdump discard s3://dead-letters/orders/ --select 'source = loadtest' --reason "load test leftovers"`,
		Args: argsRange(1, -1, "LOCATION ID..."),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			if len(ids) == 0 && ff.sel == "" && len(ff.where) == 0 && ff.since == "" && ff.until == "" {
				return usageErrorf("give the IDs of the records to discard, or --select")
			}
			if strings.TrimSpace(a.changes.reason) == "" {
				return usageErrorf("--reason is required: say why the records are discarded (it is kept with each of them)")
			}
			flt, err := ff.parse(time.Now())
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				flt.withIDs(ids)
			}
			if lease < time.Second {
				return usageErrorf("--lease %s: want at least 1s", lease)
			}
			scope := "select " + flt.sel.String()
			if len(ids) > 0 && ff.onlyIDs() {
				scope = idsScope(ids)
			}
			return a.discard(args[0], flt, scope, dryRun, lease)
		}),
	}
	fl := cmd.Flags()
	fl.BoolVar(&dryRun, "dry-run", false, "count what would be discarded; change nothing")
	fl.StringVar(&ff.sel, "select", "", `discard the records this expression selects (docs/SELECT.md), with the IDs or instead of them`)
	fl.StringVar(&ff.since, "since", "", "only records that entered the dump at or after this time (forms of restore --since)")
	fl.StringVar(&ff.until, "until", "", "only records that entered the dump before this time")
	fl.StringArrayVar(&ff.where, "where", nil, "only records whose header KEY has VALUE, as KEY=VALUE (repeatable)")
	fl.Uint64Var(&ff.limit, "limit", 0, "discard at most this many records (0: no limit)")
	durationVar(fl, &lease, "lease", 30*time.Second, "claim lease on each segment, renewed every third of it")
	_ = fl.MarkHidden("lease")
	return cmd
}

// discard runs a discard pass over what flt selects.
func (a *app) discard(loc string, flt *filter, scope string, dryRun bool, lease time.Duration) error {
	l, err := a.open(loc, true)
	if err != nil {
		return err
	}
	actor := a.actor()
	cfg := &dlqdump.Config{Reader: l.reader, Decoder: decoder.Fallthrough{}, Queue: nowhere{}, Logger: a.logger(), Owner: cliOwner(), Lease: lease, MaxRecordSize: a.recordSize.size,
		VersionCompatible: func(_, _ dlqdump.Version) bool { return true }}
	ids, err := a.identities()
	if err != nil {
		return err
	}
	cfg.Encryption = &dlqdump.Encryption{Identities: ids}
	r, err := dlqdump.NewRestorer(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	go func() {
		<-a.soft.Done()
		_ = r.Shutdown(a.ctx) // stop at the next record, keeping what was done
	}()
	opts := runOptions(flt)
	opts.DryRun = dryRun
	opts.Discard = "by " + actor + ": " + a.changes.reason
	rep, runErr := r.Run(a.ctx, opts)
	runErr = keyHint(runErr)
	if dryRun {
		a.printOut(fmt.Sprintf("dry run of discard from %s: would set %s aside into the quarantine; nothing was changed", l, plural(rep.Quarantined, "record")))
		return runErr
	}
	if rep.Quarantined > 0 {
		a.logChange(l, changelog.ActionDiscard, scope, fmt.Sprintf("discarded %s into the quarantine", plural(rep.Quarantined, "record")), runErr)
	}
	if !a.quiet {
		a.printErr(fmt.Sprintf("discarded %s from %s into the quarantine (%q); restorable with dlqdump quarantine release, removed by the quarantine's retention",
			plural(rep.Quarantined, "record"), l, opts.Discard))
	}
	if runErr != nil {
		if errors.Is(runErr, dlqdump.ErrClosed) && a.interrupted() {
			return nil
		}
		return runErr
	}
	if rep.Quarantined == 0 {
		return fmt.Errorf("no ready record of %s is selected: nothing was discarded (dlqdump cat %s --area all --select ... shows where they are)", l, l.raw)
	}
	return nil
}

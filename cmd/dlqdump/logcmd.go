package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/changelog"
)

type logFlags struct {
	asJSON       bool
	actions      []string
	actor        string
	grep         string
	since, until string
	limit        int
	oldest       bool
	verify       bool
	anchor       string
}

func newLogCmd(a *app) *cobra.Command {
	var f logFlags
	cmd := &cobra.Command{
		Use:   "log LOCATION",
		Short: "The store's change log: who changed what, when and why (--verify: check its chain)",
		Long: `Print the change log of a store, newest first: every change made to it by
dlqdump (a job created, paused, resumed, cancelled; quarantined segments
released; records replayed, restored or discarded; segments pruned, moved,
copied in, rewrapped or summarized), by the web console and by programs that
append to it, each with who made it (the console's user, --actor, or the OS
user and host), the action, what it applied to, why (--reason), what it did
and when. The log is kept in the store (DIR/.tables/changelog/,
PREFIX.tables/changelog/), shared by every process on it.

Each entry holds the hash of the one before it: --verify reads the whole log
and names the first entry that was changed or removed since it was written
(exit status 3), or prints the head (its number and hash). A chain cannot
tell that its newest entries were cut, or that every entry after a changed
one was rewritten too: keep the head somewhere else (a ticket, a monitoring
system) and verify against it later with --anchor SEQ:HASH.`,
		Example: `  dlqdump log /var/lib/app/dlq
  dlqdump log /var/lib/app/dlq --action discard --action replay --since 24h
  dlqdump log s3://dead-letters/orders/ --actor alice --json
  dlqdump log /var/lib/app/dlq --verify
  dlqdump log /var/lib/app/dlq --verify --anchor 1234:5f0c…`,
		Args: argsRange(1, 1, "LOCATION"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.changeLog(args[0], &f)
		}),
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "one JSON object per entry and line, whole")
	fl.StringArrayVar(&f.actions, "action", nil, "only entries of this action (repeatable): job (every job action), job.create, job.pause, job.resume, job.cancel, job.retry, release, discard, replay, restore, prune, mv, cp, rewrap, summarize")
	fl.StringVar(&f.actor, "who", "", "only entries whose actor contains this text")
	fl.StringVar(&f.grep, "grep", "", "only entries whose actor, action, scope, reason, result or error contains this text")
	fl.StringVar(&f.since, "since", "", "only entries made at or after this time: RFC 3339, a date (UTC) or a duration ago (90m, 7d)")
	fl.StringVar(&f.until, "until", "", "only entries made before this time (same forms as --since)")
	fl.IntVar(&f.limit, "limit", 100, "print at most this many entries (0: all)")
	fl.BoolVar(&f.oldest, "oldest-first", false, "print the oldest entries first")
	fl.BoolVar(&f.verify, "verify", false, "check the log's hash chain instead of printing it")
	fl.StringVar(&f.anchor, "anchor", "", "with --verify: an entry known from elsewhere, SEQ:HASH, that must still be in the log")
	return cmd
}

func (a *app) changeLog(loc string, f *logFlags) error {
	now := time.Now()
	var flt changelog.Filter
	var err error
	if flt.Since, err = parseWhen("--since", f.since, now); err != nil {
		return err
	}
	if flt.Until, err = parseWhen("--until", f.until, now); err != nil {
		return err
	}
	flt.Actions, flt.Actor, flt.Text = f.actions, f.actor, f.grep
	if f.limit < 0 {
		return usageErrorf("--limit %d: want 0 (all) or more", f.limit)
	}
	if f.anchor != "" && !f.verify {
		return usageErrorf("--anchor goes with --verify")
	}
	if f.anchor != "" {
		if _, err := changelog.ParseAnchor(f.anchor); err != nil {
			return usageErrorf("--anchor: %v", err)
		}
	}
	l, err := a.open(loc, true)
	if err != nil {
		return err
	}
	lg, err := changelog.Open(l.reader)
	if err != nil {
		return err
	}
	if f.verify {
		return a.verifyLog(l, lg, f.anchor)
	}
	entries := lg.Newest(a.ctx)
	if f.oldest {
		entries = lg.Entries(a.ctx)
	}
	t := newTable(0)
	t.add("SEQ", "TIME", "ACTOR", "ACTION", "SCOPE", "RESULT", "REASON")
	n := 0
	for e, err := range entries {
		if err != nil {
			return err
		}
		if !flt.Match(&e) {
			continue
		}
		if f.asJSON {
			if err := jsonLine(a.stdout, e); err != nil {
				return err
			}
		} else {
			result := e.Result
			if e.Error != "" {
				result = "FAILED: " + e.Error
				if e.Result != "" {
					result = e.Result + "; FAILED: " + e.Error
				}
			}
			actor := e.Actor
			if e.Role != "" {
				actor += " (" + e.Role + ")"
			}
			t.add(strconv.FormatUint(e.Seq, 10), fmtTime(e.Time), logCell(actor, 40), logCell(e.Action, 20), logCell(e.Scope, 72),
				logCell(result, 60), logCell(e.Reason, 60))
		}
		n++
		if f.limit > 0 && n >= f.limit {
			break
		}
	}
	if f.asJSON {
		return nil
	}
	if n == 0 {
		a.infof("no entries in the change log of %s that match", l)
		return nil
	}
	return t.write(a.stdout)
}

// logCell is a cell of the log's table: "-" when empty, cut to n
// characters (ending in "…"; --json prints it whole), quoted when it holds
// control or format characters (a bidi override shows as \u202e).
func logCell(s string, n int) string {
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return quoteCell(s)
}

func (a *app) verifyLog(l *location, lg *changelog.Log, anchor string) error {
	v, err := lg.Verify(a.ctx, changelog.VerifyOptions{Anchor: anchor})
	if err != nil && !errors.Is(err, changelog.ErrBroken) {
		return err
	}
	if v.Broken != nil {
		a.printOut(fmt.Sprintf("change log of %s: BROKEN at entry %d (page %d): %s", l, v.Broken.Seq, v.Broken.Page, v.Broken.Reason))
		if e := v.Broken.Entry; e != nil {
			a.printOut(fmt.Sprintf("  entry as stored: %s %s %s", fmtTime(e.Time), e.Actor, e.What()))
		}
		a.printOut(fmt.Sprintf("  %s before it verified", plural(v.Entries, "entry")))
		return &exitErr{code: exitDamage, err: fmt.Errorf("the change log of %s is broken at entry %d", l, v.Broken.Seq)}
	}
	if v.Entries == 0 {
		a.printOut(fmt.Sprintf("change log of %s: empty", l))
		return nil
	}
	found := ""
	if anchor != "" {
		found = ", anchor " + anchor + " found"
	}
	a.printOut(fmt.Sprintf("change log of %s: %s in %s, chain intact%s", l, plural(v.Entries, "entry"), plural(v.Pages, "page"), found))
	a.printOut(fmt.Sprintf("head %s", v.Head))
	a.infof("keep the head elsewhere to find a cut or rewritten log later: dlqdump log %s --verify --anchor %s", l.raw, v.Head)
	return nil
}

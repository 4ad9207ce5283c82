package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/errgroups"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

func newErrorsCmd(a *app) *cobra.Command {
	var (
		asJSON    bool
		area, sel string
		header    string
		top, bars int
		maxGroups int
	)
	cmd := &cobra.Command{
		Use:   "errors LOCATION [SEGMENT...]",
		Short: "Records grouped by error signature, with counts over time",
		Long: `Group the records of a dump by the signature of their error: the "error"
header (or --header KEY) with numbers, IDs, hex, UUIDs, quoted values, URLs
and addresses masked, so that "payment gateway timeout after 137ms" and
"... after 2041ms" are one group, "payment gateway timeout after <num>ms".
Each group is shown with its count, when it was first and last seen, a trend
(its counts over the dump's time, in --bars bars), and the ID of a sample
record. --select EXPR groups only the records the expression selects
(docs/SELECT.md). Records a restorer already handled are not counted.

A group's records are selected by "KEY like SIGNATURE" (the selection
language's like: any message of the group, or its signature): replay one
with dlqdump job create LOCATION --select 'error like "..."' (--jq to fix
them on the way), or look at them with dlqdump cat --select.

With --json, one object:
  {"header":"error","records":11280,"without":30,"groups":10,
   "from":"...","step_s":300,"bars":12,
   "shown":[{"signature":"payment gateway timeout after <num>ms","count":10050,
     "first":"...","last":"...","counts":[812,...],
     "sample":{"id":"...","time":"...","value":"payment gateway timeout after 137ms",
       "segment":"...","area":"ready"},
     "select":"error like \"payment gateway timeout after <num>ms\""}, ...]}`,
		Example: `  dlqdump errors /var/lib/app/dlq
  dlqdump errors /var/lib/app/dlq --select 'source = billing and time >= now-1h' --top 5
  dlqdump errors s3://dead-letters/orders/ --header quarantine --area quarantine --json`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			expr, err := parseSelect("--select", sel, time.Now())
			if err != nil {
				return err
			}
			switch {
			case top < 0:
				return usageErrorf("--top %d: want 0 (all) or more", top)
			case bars < 1 || bars > 200:
				return usageErrorf("--bars %d: want 1 to 200", bars)
			case header == "":
				return usageErrorf("--header: want a header name")
			case maxGroups < 1:
				return usageErrorf("--max-groups %d: want 1 or more", maxGroups)
			}
			flt := &filter{sel: expr, expr: expr}
			areas, err := flt.areas(cmd.Flags(), area, args[1:], "all")
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
			c, failed, damaged, err := a.countErrors(l, infos, expr, &errgroups.Options{Header: header, MaxGroups: maxGroups})
			if err != nil {
				return err
			}
			rep := c.Report(top, bars)
			if asJSON {
				err = jsonLine(a.stdout, rep)
			} else {
				err = writeErrors(a.stdout, &rep, top, l.raw)
			}
			if err != nil {
				return err
			}
			return readOutcome(failed, damaged, "")
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&header, "header", errgroups.DefaultHeader, "group by the signature of this header")
	fl.StringVar(&sel, "select", "", "group only the records this expression selects (docs/SELECT.md)")
	fl.StringVar(&area, "area", "all", "ready, quarantine, archive or all")
	fl.IntVar(&top, "top", 20, "show the largest N groups (0: all)")
	fl.IntVar(&bars, "bars", 12, "bars of a group's trend")
	fl.IntVar(&maxGroups, "max-groups", errgroups.DefaultMaxGroups, "groups kept; the records of the others are counted under (other)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// countErrors counts the records of infos by error group, one Counter per
// segment merged, as stat reads them (what restores handled left out).
func (a *app) countErrors(l *location, infos []sink.Info, sel *selection.Selection, o *errgroups.Options) (c *errgroups.Counter, failed, damaged int, err error) {
	claimed, err := a.inspectAll(l, infos)
	if err != nil {
		return nil, 0, 0, err
	}
	c = errgroups.New(o)
	for _, si := range infos {
		cv := claimed[si.Name]
		seg := errgroups.New(o)
		hurt := false
		_, err := a.walk(l, si, walkOpts{Done: cv, Select: sel}, func(hdr *segment.Header, b *segment.Block) error {
			seg.AddBlock(hdr, si.Area, si.Name, b, inspect.Keep(si, hdr, cv, sel))
			return nil
		}, func(err error) {
			hurt = true
			a.warnf("damage: %v", err)
		})
		if hurt {
			damaged++
		}
		if err != nil {
			if a.interrupted() || errors.Is(err, segment.ErrNoKey) {
				return nil, 0, 0, err
			}
			a.warnf("%v", err)
			failed++
			continue
		}
		c.Merge(seg)
	}
	return c, failed, damaged, nil
}

// sparkline draws counts as a line of block characters, the largest full.
func sparkline(counts []uint64) string {
	const levels = "▁▂▃▄▅▆▇█"
	ls := []rune(levels)
	var hi uint64
	for _, n := range counts {
		hi = max(hi, n)
	}
	var b strings.Builder
	for _, n := range counts {
		switch {
		case n == 0:
			b.WriteRune(' ')
		default:
			b.WriteRune(ls[min(len(ls)-1, int((n*uint64(len(ls))-1)/max(hi, 1)))])
		}
	}
	return b.String()
}

func writeErrors(w io.Writer, rep *errgroups.Report, top int, loc string) error {
	t := newTable(0)
	t.add("COUNT", "FIRST", "LAST", "TREND", "SIGNATURE")
	for _, g := range rep.Shown {
		t.add(strconv.FormatUint(g.Count, 10), fmtTime(g.First), fmtTime(g.Last), sparkline(g.Counts), g.Signature)
	}
	if err := t.write(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s in %s", plural(rep.Records, "record"), plural(rep.Groups, "group"))
	if rep.Without > 0 {
		fmt.Fprintf(w, "; %d without the %q header", rep.Without, rep.Header)
	}
	if top > 0 && rep.Groups > len(rep.Shown) {
		fmt.Fprintf(w, "; the largest %d shown (--top)", len(rep.Shown))
	}
	if rep.Bars > 0 {
		fmt.Fprintf(w, "; a trend bar is %s from %s", time.Duration(rep.StepS)*time.Second, fmtTime(rep.From))
	}
	fmt.Fprintln(w)
	if len(rep.Shown) > 0 && rep.Shown[0].Select != "" {
		fmt.Fprintf(w, "replay a group: dlqdump job create %s --select %s\n", loc, shellQuote(rep.Shown[0].Select))
	}
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

func newStatCmd(a *app) *cobra.Command {
	var (
		asJSON bool
		area   string
		by     []string
		sel    string
	)
	cmd := &cobra.Command{
		Use:   "stat LOCATION [SEGMENT...]",
		Short: "Totals and records by header value",
		Long: `Print the totals of a dump (segments by state, records, raw and stored bytes,
compression ratio, oldest and newest record) and how many records have each
value of a header: "reason" by default, or each --by KEY, and how many
segments are encrypted (and for which kinds of recipient). Every record is
read, so damaged blocks are found (and reported on stderr, exit status 3).
Records a restorer already handled (before the restore progress kept in a
segment's claim record) are not counted: only what is still in the dump.
Each value is shown with the ID of a record that has it (its first), for
dlqdump cat --select 'id = ...'. --select EXPR counts only the records the
expression selects (docs/SELECT.md), reading only the segments and blocks
their summaries do not rule out.

With --json, one object:
  {"segments":4,"states":{"ready":2,"claimed":0,"quarantined":1,"archived":1},
   "records":120,"raw_bytes":30720,"stored_bytes":4096,"ratio":7.5,
   "oldest":"...","newest":"...","damaged_blocks":0,
   "encrypted":2,"recipients":{"X25519":2},
   "by":{"reason":{"values":{"failed":80,"leak":30},"missing":10,
     "examples":{"failed":"2c3d4e5f60718293a4b5c6d1-0","leak":"..."}}}}`,
		Example: `  dlqdump stat /var/lib/app/dlq
  dlqdump stat /var/lib/app/dlq --by reason --by source
  dlqdump stat /var/lib/app/dlq --by error --select 'source = orders and time >= now-1h'
  dlqdump stat s3://dead-letters/orders/ --area ready --json`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			expr, err := parseSelect("--select", sel, time.Now())
			if err != nil {
				return err
			}
			flt := &filter{sel: expr, expr: expr}
			areas, err := flt.areas(cmd.Flags(), area, args[1:], "all")
			if err != nil {
				return err
			}
			if len(by) == 0 {
				by = []string{dlqdump.HeaderReason}
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			infos, err := a.list(l, areas, args[1:])
			if err != nil {
				return err
			}
			return a.stat(l, infos, by, asJSON, expr)
		}),
	}
	cmd.Flags().StringVar(&sel, "select", "", "count only the records this expression selects (docs/SELECT.md)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&area, "area", "all", "ready, quarantine, archive or all")
	cmd.Flags().StringArrayVar(&by, "by", nil, "count records by the values of this header (repeatable; default reason)")
	return cmd
}

// valueCounts counts the values of one header, with the ID of the first
// record of each.
type valueCounts struct {
	values   map[string]uint64
	examples map[string]string
	missing  uint64
}

type statResult struct {
	segments       int
	states         map[string]int
	records        uint64
	raw            uint64
	stored         int64
	oldest, newest int64
	damagedBlocks  int
	damagedOther   int // damaged headers and footers
	damagedSegs    int
	encrypted      int            // encrypted segments
	recipients     map[string]int // kinds of recipient, by the segments wrapped for them
	by             map[string]*valueCounts
}

func (a *app) stat(l *location, infos []sink.Info, by []string, asJSON bool, sel *selection.Selection) error {
	claimed, err := a.inspectAll(l, infos)
	if err != nil {
		return err
	}
	res := &statResult{states: map[string]int{"ready": 0, "claimed": 0, "quarantined": 0, "archived": 0}, by: map[string]*valueCounts{},
		recipients: map[string]int{}}
	for _, k := range by {
		res.by[k] = &valueCounts{values: map[string]uint64{}, examples: map[string]string{}}
	}
	var failed []error
	for _, si := range infos {
		res.segments++
		res.stored += si.Size
		cv := claimed[si.Name]
		res.states[inspect.State(si, cv)]++
		damaged, opened := false, false
		wo := walkOpts{Done: cv, Select: sel, Opened: func(sr *segment.Reader) {
			opened = true
			res.countEncryption(inspect.EncryptionOf(sr))
		}}
		_, err := a.walk(l, si, wo, func(hdr *segment.Header, b *segment.Block) error {
			res.raw += uint64(b.Info().RawLen)
			seg := inspect.SegmentOf(si, hdr)
			for i := range b.Len() {
				rec := b.Record(i)
				if cv.Skip(rec.Seq) || !sel.Match(seg, &rec) {
					continue
				}
				if res.records == 0 || rec.Time < res.oldest {
					res.oldest = rec.Time
				}
				if res.records == 0 || rec.Time > res.newest {
					res.newest = rec.Time
				}
				res.records++
				for k, vc := range res.by {
					if v, ok := rec.Headers.Lookup(k); ok {
						if vc.values[string(v)]++; vc.values[string(v)] == 1 {
							vc.examples[string(v)] = hdr.RecordID(&rec).String()
						}
					} else {
						vc.missing++
					}
				}
			}
			return nil
		}, func(err error) {
			damaged = true
			if inspect.IsBlockDamage(err) {
				res.damagedBlocks++
			} else {
				res.damagedOther++
			}
			a.warnf("damage: %v", err)
		})
		if damaged {
			res.damagedSegs++
		}
		if !opened && errors.Is(err, segment.ErrNoKey) {
			res.countEncryption(inspect.Encryption{On: true}) // no identity given unwraps its key
		}
		if err != nil {
			if a.interrupted() || errors.Is(err, segment.ErrNoKey) {
				// Without its key no record of it can be counted: a
				// table would only mislead.
				return err
			}
			a.warnf("%v", err)
			failed = append(failed, err)
		}
	}
	if asJSON {
		err = res.writeJSON(a.stdout, by)
	} else {
		err = res.writeText(a.stdout, by)
	}
	if err != nil {
		return err
	}
	return readOutcome(len(failed), res.damagedSegs, "")
}

// countEncryption counts a segment's encryption.
func (r *statResult) countEncryption(e inspect.Encryption) {
	if !e.On {
		return
	}
	r.encrypted++
	seen := map[string]bool{}
	for _, k := range e.Kinds {
		if !seen[k] {
			seen[k] = true
			r.recipients[k]++
		}
	}
}

// encryptionText says how many segments are encrypted, and for which kinds
// of recipient.
func (r *statResult) encryptionText() string {
	s := fmt.Sprintf("%d of %d segments", r.encrypted, r.segments)
	if len(r.recipients) == 0 {
		return s
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.recipients)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.recipients[k]))
	}
	return s + " (for " + strings.Join(parts, ", ") + ")"
}

func (r *statResult) ratio() float64 {
	if r.stored <= 0 || r.raw == 0 {
		return 0
	}
	return float64(r.raw) / float64(r.stored)
}

func (r *statResult) timeRange() (oldest, newest time.Time) {
	if r.records == 0 {
		return time.Time{}, time.Time{}
	}
	return time.Unix(0, r.oldest).UTC(), time.Unix(0, r.newest).UTC()
}

// sortedValues returns a header's values, most frequent first.
func (vc *valueCounts) sortedValues() []string {
	vals := make([]string, 0, len(vc.values))
	for v := range vc.values {
		vals = append(vals, v)
	}
	slices.SortFunc(vals, func(x, y string) int {
		if c := cmp.Compare(vc.values[y], vc.values[x]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	return vals
}

func (r *statResult) writeText(w io.Writer, by []string) error {
	var states []string
	for _, s := range []string{"ready", "claimed", "quarantined", "archived"} {
		if n := r.states[s]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, s))
		}
	}
	segs := strconv.Itoa(r.segments)
	if len(states) > 0 {
		segs += " (" + strings.Join(states, ", ") + ")"
	}
	oldest, newest := r.timeRange()
	t := newTable()
	t.add("segments", segs)
	t.add("records", strconv.FormatUint(r.records, 10))
	t.add("raw", fmt.Sprintf("%s (%d bytes)", humanBytes(r.raw), r.raw))
	t.add("stored", fmt.Sprintf("%s (%d bytes)", humanBytes(r.stored), r.stored))
	t.add("ratio", fmtRatio(r.ratio()))
	t.add("oldest", orDash(jsonTime(oldest)))
	t.add("newest", orDash(jsonTime(newest)))
	t.add("encrypted", r.encryptionText())
	if r.damagedBlocks > 0 || r.damagedOther > 0 {
		t.add("damaged", r.damageText()+" (see stderr)")
	}
	if err := t.write(w); err != nil {
		return err
	}
	for _, k := range by {
		vc := r.by[k]
		fmt.Fprintf(w, "\nby %s\n", k)
		bt := newTable(1, 2)
		bt.add("  value", "records", "share", "e.g. record")
		share := func(n uint64) string {
			if r.records == 0 {
				return "-"
			}
			return strconv.FormatFloat(100*float64(n)/float64(r.records), 'f', 1, 64) + "%"
		}
		for _, v := range vc.sortedValues() {
			bt.add("  "+quoteCell(v), strconv.FormatUint(vc.values[v], 10), share(vc.values[v]), vc.examples[v])
		}
		if vc.missing > 0 {
			bt.add("  (none)", strconv.FormatUint(vc.missing, 10), share(vc.missing), "")
		}
		if len(bt.rows) == 1 {
			fmt.Fprintln(w, "  (no records)")
			continue
		}
		if err := bt.write(w); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type statValuesJSON struct {
	Values   map[string]uint64 `json:"values"`
	Missing  uint64            `json:"missing"`
	Examples map[string]string `json:"examples"` // the ID of a record of each value
}

type statJSON struct {
	Segments      int                        `json:"segments"`
	States        map[string]int             `json:"states"`
	Records       uint64                     `json:"records"`
	RawBytes      uint64                     `json:"raw_bytes"`
	StoredBytes   int64                      `json:"stored_bytes"`
	Ratio         float64                    `json:"ratio"`
	Oldest        string                     `json:"oldest,omitempty"`
	Newest        string                     `json:"newest,omitempty"`
	DamagedBlocks int                        `json:"damaged_blocks"`
	Encrypted     int                        `json:"encrypted"`
	Recipients    map[string]int             `json:"recipients,omitempty"`
	By            map[string]*statValuesJSON `json:"by"`
}

func (r *statResult) writeJSON(w io.Writer, by []string) error {
	oldest, newest := r.timeRange()
	j := statJSON{
		Segments: r.segments, States: r.states, Records: r.records, RawBytes: r.raw, StoredBytes: r.stored,
		Ratio: math.Round(r.ratio()*100) / 100, Oldest: jsonTime(oldest), Newest: jsonTime(newest),
		DamagedBlocks: r.damagedBlocks, Encrypted: r.encrypted, By: map[string]*statValuesJSON{},
	}
	if len(r.recipients) > 0 {
		j.Recipients = r.recipients
	}
	for _, k := range by {
		j.By[k] = &statValuesJSON{Values: r.by[k].values, Missing: r.by[k].missing, Examples: r.by[k].examples}
	}
	return jsonLine(w, j)
}

// damageText says what was damaged: "2 blocks", "1 header or footer",
// "3 blocks, 1 header or footer".
func (r *statResult) damageText() string {
	var parts []string
	if r.damagedBlocks > 0 {
		parts = append(parts, plural(r.damagedBlocks, "block"))
	}
	if r.damagedOther > 0 {
		parts = append(parts, fmt.Sprintf("%d header or footer", r.damagedOther))
		if r.damagedOther > 1 {
			parts[len(parts)-1] = fmt.Sprintf("%d headers or footers", r.damagedOther)
		}
	}
	return strings.Join(parts, ", ")
}

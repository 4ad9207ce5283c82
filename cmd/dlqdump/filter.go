package main

import (
	"errors"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// filterFlags are the record selection flags shared by cat, restore and
// job create.
type filterFlags struct {
	since, until string
	where        []string
	sel          string
	limit        uint64
}

func (f *filterFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.sel, "select", "", `only the records this expression selects (docs/SELECT.md), e.g. 'reason = failed and $.order.id = "ord-7"' or 'id = 019c...-42'`)
	fl.StringVar(&f.since, "since", "", "only records that entered the dump at or after this time: RFC 3339 (2026-03-01T12:00:00Z), a date (2026-03-01, UTC) or a duration ago (90m, 1h, 7d)")
	fl.StringVar(&f.until, "until", "", "only records that entered the dump before this time (same forms as --since)")
	fl.StringArrayVar(&f.where, "where", nil, "only records whose header KEY has VALUE, as KEY=VALUE (repeatable: all must match)")
	fl.Uint64Var(&f.limit, "limit", 0, "stop after this many records (0: no limit)")
}

// filter selects records: the flags' selection (sel, everything ANDed)
// and its parts, for the Restorer's and a job's fields of their own.
type filter struct {
	sel          *selection.Selection // --select and the other flags
	expr         *selection.Selection // --select alone
	since, until time.Time
	where        dlqdump.Headers
	limit        uint64
}

// match reports whether rec, a record of segment si whose header is hdr,
// is selected.
func (f *filter) match(seg *selection.Segment, rec *segment.Record) bool {
	return f.sel.Match(seg, rec)
}

// parse turns the flags into a filter, relative to now.
func (f *filterFlags) parse(now time.Time) (*filter, error) {
	flt := &filter{limit: f.limit}
	var err error
	if flt.expr, err = parseSelect("--select", f.sel, now); err != nil {
		return nil, err
	}
	if flt.since, err = parseWhen("--since", f.since, now); err != nil {
		return nil, err
	}
	if flt.until, err = parseWhen("--until", f.until, now); err != nil {
		return nil, err
	}
	if !flt.since.IsZero() && !flt.until.IsZero() && !flt.since.Before(flt.until) {
		return nil, usageErrorf("--since %s is not before --until %s", flt.since.Format(time.RFC3339Nano), flt.until.Format(time.RFC3339Nano))
	}
	for _, w := range f.where {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--where %q: want KEY=VALUE", w)
		}
		if flt.where == nil {
			flt.where = dlqdump.Headers{}
		}
		if old, dup := flt.where[k]; dup && old != v {
			return nil, usageErrorf("--where: header %q cannot be both %q and %q", k, old, v)
		}
		flt.where[k] = v
	}
	flt.sel = selection.And(flt.expr, selection.TimeRange(flt.since, flt.until), selection.Where(flt.where))
	return flt, nil
}

// withIDs narrows the filter to the records of ids.
func (f *filter) withIDs(ids []segment.RecordID) {
	f.expr = selection.And(f.expr, selection.IDs(ids...))
	f.sel = selection.And(f.sel, selection.IDs(ids...))
}

// parseSelect parses a selection given to flag; an error shows where it is
// wrong.
func parseSelect(flag, expr string, now time.Time) (*selection.Selection, error) {
	sel, err := selection.Parse(expr, &selection.Options{Now: now})
	if err != nil {
		var se *selection.Error
		if errors.As(err, &se) {
			return nil, usageErrorf("%s: %v\n  %s", flag, err, strings.ReplaceAll(se.Caret(), "\n", "\n  "))
		}
		return nil, usageErrorf("%s: %v", flag, err)
	}
	return sel, nil
}

// areas returns the areas to read: those the selection names when it
// names some and --area was not given, else areasFlag's.
func (f *filter) areas(fl *pflag.FlagSet, value string, names []string, def string) ([]sink.Area, error) {
	if a := fl.Lookup("area"); a != nil && !a.Changed && len(names) == 0 && f.sel.NamesArea() {
		return f.sel.Areas(allAreas...), nil
	}
	areas, err := areasFlag(fl, value, names, def)
	if err != nil {
		return nil, err
	}
	return f.sel.Areas(areas...), nil
}

// parseWhen parses an absolute time or a duration before now; "" is the
// zero time.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if d, err := parseAgo(s); err == nil {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, usageErrorf("%s %q: want an RFC 3339 time (2026-03-01T12:00:00Z), a date (2026-03-01) or a duration ago (90m, 1h, 7d)", flag, s)
}

// parseAgo parses a Go duration, also accepting the units d (24h) and w
// (7d), e.g. "7d" or "1d12h" (selection.ParseAgo).
func parseAgo(s string) (time.Duration, error) { return selection.ParseAgo(s) }

// runOptions returns the Restorer's options for the filter.
func runOptions(f *filter) dlqdump.RunOptions {
	o := dlqdump.RunOptions{Since: f.since, Until: f.until, Where: f.where, Limit: f.limit}
	if !f.expr.IsAll() {
		o.Select = f.expr
	}
	return o
}

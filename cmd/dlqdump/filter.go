package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/inspect"
)

// filterFlags are the record selection flags shared by cat and restore.
type filterFlags struct {
	since, until string
	where        []string
	limit        uint64
}

func (f *filterFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.since, "since", "", "only records that entered the dump at or after this time: RFC 3339 (2026-03-01T12:00:00Z), a date (2026-03-01, UTC) or a duration ago (90m, 1h, 7d)")
	fl.StringVar(&f.until, "until", "", "only records that entered the dump before this time (same forms as --since)")
	fl.StringArrayVar(&f.where, "where", nil, "only records whose header KEY has VALUE, as KEY=VALUE (repeatable: all must match)")
	fl.Uint64Var(&f.limit, "limit", 0, "stop after this many records (0: no limit)")
}

// filter selects records (see inspect.Filter).
type filter = inspect.Filter

// parse turns the flags into a filter, relative to now.
func (f *filterFlags) parse(now time.Time) (*filter, error) {
	flt := &filter{Limit: f.limit}
	var err error
	if flt.Since, err = parseWhen("--since", f.since, now); err != nil {
		return nil, err
	}
	if flt.Until, err = parseWhen("--until", f.until, now); err != nil {
		return nil, err
	}
	if !flt.Since.IsZero() && !flt.Until.IsZero() && !flt.Since.Before(flt.Until) {
		return nil, usageErrorf("--since %s is not before --until %s", flt.Since.Format(time.RFC3339Nano), flt.Until.Format(time.RFC3339Nano))
	}
	for _, w := range f.where {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--where %q: want KEY=VALUE", w)
		}
		if flt.Where == nil {
			flt.Where = dlqdump.Headers{}
		}
		if old, dup := flt.Where[k]; dup && old != v {
			return nil, usageErrorf("--where: header %q cannot be both %q and %q", k, old, v)
		}
		flt.Where[k] = v
	}
	return flt, nil
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
// (7d), e.g. "7d" or "1d12h".
func parseAgo(s string) (time.Duration, error) {
	var total time.Duration
	rest := s
	for rest != "" {
		i := strings.IndexAny(rest, "dw")
		if i < 0 {
			break
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, err
		}
		unit := 24 * time.Hour
		if rest[i] == 'w' {
			unit *= 7
		}
		total += time.Duration(n * float64(unit))
		rest = rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, err
		}
		total += d
	}
	if total < 0 {
		return 0, strconv.ErrRange
	}
	return total, nil
}

// runOptions returns the Restorer's options for the filter.
func runOptions(f *filter) dlqdump.RunOptions {
	return dlqdump.RunOptions{Since: f.Since, Until: f.Until, Where: f.Where, Limit: f.Limit}
}

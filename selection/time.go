package selection

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// timeLayouts are the absolute times a selection takes, UTC unless they
// say otherwise.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseTime parses an absolute time or now-DURATION.
func parseTime(s string, now time.Time) (time.Time, error) {
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if s == "now" {
		return now.UTC(), nil
	}
	if rest, ok := strings.CutPrefix(s, "now-"); ok {
		d, err := ParseAgo(rest)
		if err == nil {
			return now.Add(-d).UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2026-03-01T12:00:00Z), 2026-03-01T12:00 (UTC), a date, or now-DURATION (now-90m, now-7d)", s)
}

// ParseAgo parses a Go duration, also taking the units d (24h) and w (7d),
// e.g. "7d" or "1d12h". It is the duration of now-DURATION, and of the
// command line's --since 7d.
func ParseAgo(s string) (time.Duration, error) {
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
	if total < 0 || s == "" {
		return 0, strconv.ErrRange
	}
	return total, nil
}

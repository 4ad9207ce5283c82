package console

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// query is a selection of records, as the page's search form and the
// record API's parameters give it:
//
//	select=EXPR                          a selection (docs/SELECT.md); the
//	                                     parameters below are ANDed to it
//	area=ready|quarantine|archive|all   (default ready; the areas EXPR
//	                                     names, when it names some)
//	since=, until=                       RFC 3339, or 2006-01-02T15:04[:05] (UTC)
//	where=KEY=VALUE                      repeatable: all must match
//	q=TEXT                               payload contains TEXT
//	path=$.a.b, value=V                  a JSON path (and its value)
//	segment=NAME                         repeatable: only these segments
//	after=CURSOR                         where the previous page stopped
//	n=50                                 page size, at most 200
type query struct {
	areas    []sink.Area
	sel      *selection.Selection
	segments map[string]bool // nil: every segment
	after    cursor
	n        int
}

func badQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", dlqdump.ErrConfig, fmt.Sprintf(format, args...))
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, badQuery("%s %q: want an RFC 3339 time (2026-03-01T12:00:00Z) or 2026-03-01T12:00", field, s)
}

var allAreas = []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive}

// parseAreas parses an area parameter.
func parseAreas(s string) ([]sink.Area, error) {
	switch s {
	case "", "ready":
		return []sink.Area{sink.AreaReady}, nil
	case "all":
		return allAreas, nil
	}
	a, err := sink.ParseArea(s)
	if err != nil {
		return nil, badQuery("area %q: want ready, quarantine, archive or all", s)
	}
	return []sink.Area{a}, nil
}

func (h *Handler) parseQuery(v url.Values) (*query, error) {
	q := &query{n: 50}
	var err error
	if q.areas, err = parseAreas(v.Get("area")); err != nil {
		return nil, err
	}
	var decode func([]byte) ([]byte, bool)
	if h.proto != nil {
		decode = func(payload []byte) ([]byte, bool) {
			js, _, err := h.proto.Format(payload)
			return js, err == nil
		}
	}
	expr, err := selection.Parse(v.Get("select"), &selection.Options{Decode: decode})
	if err != nil {
		return nil, err
	}
	since, err := parseTime("since", v.Get("since"))
	if err != nil {
		return nil, err
	}
	until, err := parseTime("until", v.Get("until"))
	if err != nil {
		return nil, err
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return nil, badQuery("since %s is not before until %s", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	var where map[string]string
	for _, w := range v["where"] {
		if w == "" {
			continue
		}
		k, val, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, badQuery("where %q: want KEY=VALUE", w)
		}
		if where == nil {
			where = map[string]string{}
		}
		if old, dup := where[k]; dup && old != val {
			return nil, badQuery("where: header %q cannot be both %q and %q", k, old, val)
		}
		where[k] = val
	}
	path := selection.All()
	if p := strings.TrimSpace(v.Get("path")); p != "" {
		if path, err = selection.JSON(p, v.Get("value"), decode); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, s := range v["segment"] {
		if s == "" {
			continue
		}
		if err := checkName(s); err != nil {
			return nil, err
		}
		names = append(names, s)
	}
	q.sel = selection.And(expr, selection.TimeRange(since, until), selection.Where(where), selection.Contains(v.Get("q")), path, selection.Segments(names...))
	if q.sel.NamesArea() {
		q.areas = q.sel.Areas(allAreas...) // the expression says where
	}
	if names, ok := q.sel.Segments(); ok {
		q.segments = map[string]bool{}
		for _, n := range names {
			q.segments[n] = true
		}
	}
	if s := v.Get("n"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 200 {
			return nil, badQuery("n %q: want 1 to 200", s)
		}
		q.n = n
	}
	if q.after, err = parseCursor(v.Get("after")); err != nil {
		return nil, err
	}
	return q, nil
}

// cursor is where a search goes on: the record seq of segment name in area
// and everything after it (areas in the query's order, segments by name).
// Seq past the end (pastSegment) starts at the next segment.
type cursor struct {
	set  bool
	area sink.Area
	name string
	seq  uint64
}

const pastSegment = ^uint64(0)

func (c cursor) String() string {
	if !c.set {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d/%d/%s", c.area, c.seq, c.name)))
}

func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		parts := strings.SplitN(string(b), "/", 3)
		if len(parts) == 3 {
			a, err1 := strconv.ParseUint(parts[0], 10, 8)
			seq, err2 := strconv.ParseUint(parts[1], 10, 64)
			if err1 == nil && err2 == nil && sink.Area(a).Valid() && parts[2] != "" {
				return cursor{set: true, area: sink.Area(a), seq: seq, name: parts[2]}, nil
			}
		}
	}
	return cursor{}, badQuery("after %q: not a cursor this console gave", s)
}

// checkName returns an error wrapping dlqdump.ErrConfig unless name could
// be a segment's: a plain name ending in ".dlq" (the sinks check it again).
func checkName(name string) error {
	if !strings.HasSuffix(name, ".dlq") || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
		return badQuery("segment %q: not a segment name", name)
	}
	return nil
}

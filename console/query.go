package console

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

// query is a selection of records, as the page's search form and the
// record API's parameters give it:
//
//	area=ready|quarantine|archive|all   (default ready)
//	since=, until=                       RFC 3339, or 2006-01-02T15:04[:05] (UTC)
//	where=KEY=VALUE                      repeatable: all must match
//	q=TEXT                               payload contains TEXT
//	path=$.a.b, value=V                  a JSON path (and its value)
//	segment=NAME                         repeatable: only these segments
//	after=CURSOR                         where the previous page stopped
//	n=50                                 page size, at most 200
type query struct {
	areas    []sink.Area
	flt      inspect.Filter
	segments map[string]bool
	after    cursor
	n        int
}

// jobable reports whether a restore job can select what the query does: by
// time and headers, not by payload.
func (q *query) jobable() bool { return q.flt.Text == "" && q.flt.Path == nil }

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

// parseAreas parses an area parameter.
func parseAreas(s string) ([]sink.Area, error) {
	switch s {
	case "", "ready":
		return []sink.Area{sink.AreaReady}, nil
	case "all":
		return []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive}, nil
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
	if q.flt.Since, err = parseTime("since", v.Get("since")); err != nil {
		return nil, err
	}
	if q.flt.Until, err = parseTime("until", v.Get("until")); err != nil {
		return nil, err
	}
	if !q.flt.Since.IsZero() && !q.flt.Until.IsZero() && !q.flt.Since.Before(q.flt.Until) {
		return nil, badQuery("since %s is not before until %s", q.flt.Since.Format(time.RFC3339), q.flt.Until.Format(time.RFC3339))
	}
	for _, w := range v["where"] {
		if w == "" {
			continue
		}
		k, val, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, badQuery("where %q: want KEY=VALUE", w)
		}
		if q.flt.Where == nil {
			q.flt.Where = map[string]string{}
		}
		if old, dup := q.flt.Where[k]; dup && old != val {
			return nil, badQuery("where: header %q cannot be both %q and %q", k, old, val)
		}
		q.flt.Where[k] = val
	}
	q.flt.Text = v.Get("q")
	if p := strings.TrimSpace(v.Get("path")); p != "" {
		if q.flt.Path, err = inspect.ParseJSONPath(p); err != nil {
			return nil, err
		}
		q.flt.PathValue = v.Get("value")
		if h.proto != nil {
			q.flt.Decode = func(payload []byte) ([]byte, bool) {
				js, _, err := h.proto.Format(payload)
				return js, err == nil
			}
		}
	}
	for _, s := range v["segment"] {
		if s == "" {
			continue
		}
		if err := checkName(s); err != nil {
			return nil, err
		}
		if q.segments == nil {
			q.segments = map[string]bool{}
		}
		q.segments[s] = true
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

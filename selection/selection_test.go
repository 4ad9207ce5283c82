package selection_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/selection/selectiontest"
	"github.com/dlqdump/dlqdump/sink"
)

// readSegment is a segment of the table, written and read back: its
// records, and what a plan knows of it.
type readSegment struct {
	seg  selection.Segment
	recs []segment.Record
	name []string // the records' names
}

// tableSegments writes the table's segments, with summaries and blocks of
// a few records, and reads them back.
func tableSegments(t *testing.T, tb *selectiontest.Table) []readSegment {
	var out []readSegment
	for _, s := range tb.Segments {
		var buf bytes.Buffer
		w, err := segment.NewWriter(&buf, s.Header, &segment.WriterOptions{Summarize: true, BlockSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Records {
			if err := w.Add(r.Time, r.Headers, []byte(r.Payload)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := segment.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := r.Summary()
		if err != nil || sum == nil {
			t.Fatalf("summary: %v, %v", sum, err)
		}
		area, _ := sink.ParseArea(s.Area)
		hdr := r.Header()
		rs := readSegment{seg: selection.Segment{Area: area, Name: s.Name, Header: &hdr, Footer: r.Footer(), Summary: sum}}
		for _, rec := range s.Records {
			rs.name = append(rs.name, rec.Name)
		}
		// ReadBlock gives each block memory of its own: the records
		// stay valid.
		var b segment.Block
		for {
			err := r.ReadBlock(&b)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for rec := range b.Records() {
				rs.recs = append(rs.recs, rec)
			}
		}
		if len(rs.recs) != len(s.Records) || len(s.Records) > 2 && len(rs.seg.Footer.Blocks) < 2 {
			t.Fatalf("segment %s: %d records read in %d blocks", s.Name, len(rs.recs), len(rs.seg.Footer.Blocks))
		}
		out = append(out, rs)
	}
	return out
}

var now = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// TestCases runs the shared table: errors name their column, expressions
// print as the table says and parse again to the same, match the records
// the table lists, and their plans never skip a segment or block holding
// a record they match.
func TestCases(t *testing.T) {
	tb := selectiontest.Load(t)
	segs := tableSegments(t, tb)
	for _, c := range tb.Cases {
		t.Run(c.Expr, func(t *testing.T) {
			s, err := selection.Parse(c.Expr, &selection.Options{Now: now})
			if c.Error != "" {
				var se *selection.Error
				if !errors.As(err, &se) || !errors.Is(err, selection.ErrSelection) {
					t.Fatalf("Parse(%q) = %v, want an *Error", c.Expr, err)
				}
				if se.Column() != c.Column || !strings.Contains(err.Error(), c.Error) {
					t.Fatalf("Parse(%q): %v (column %d), want column %d and %q", c.Expr, err, se.Column(), c.Column, c.Error)
				}
				if caret := se.Caret(); !strings.Contains(caret, "^") {
					t.Fatalf("Caret() = %q", caret)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.Expr, err)
			}
			if c.String != nil && s.String() != *c.String {
				t.Fatalf("String() = %q, want %q", s.String(), *c.String)
			}
			again, err := selection.Parse(s.String(), &selection.Options{Now: now})
			if err != nil || again.String() != s.String() {
				t.Fatalf("String() %q parses to %v, %v", s.String(), again, err)
			}
			var got []string
			for _, rs := range segs {
				plan := s.Plan(&rs.seg)
				for i := range rs.recs {
					m := s.Match(&rs.seg, &rs.recs[i])
					if m != again.Match(&rs.seg, &rs.recs[i]) {
						t.Fatalf("%s: the printed form matches otherwise", rs.name[i])
					}
					if !m {
						continue
					}
					got = append(got, rs.name[i])
					blk := blockOf(rs.seg.Footer, rs.recs[i].Seq)
					if plan.Skip || plan.Blocks != nil && !plan.Blocks[blk] {
						t.Fatalf("%s matches, and the plan skips it: %+v", rs.name[i], plan)
					}
				}
			}
			if g, w := strings.Join(selectiontest.Sorted(got), ","), strings.Join(selectiontest.Sorted(c.Match), ","); g != w {
				t.Fatalf("matches %s, want %s", g, w)
			}
		})
	}
}

func blockOf(ft *segment.Footer, seq uint64) int {
	for i, b := range ft.Blocks {
		if seq < b.FirstSeq+uint64(b.Count) {
			return i
		}
	}
	return -1
}

// TestPlanSkips checks that plans skip what they know cannot match.
func TestPlanSkips(t *testing.T) {
	tb := selectiontest.Load(t)
	segs := tableSegments(t, tb)
	ready, quar := &segs[0].seg, &segs[1].seg
	for _, c := range []struct {
		expr        string
		seg         *selection.Segment
		skip        bool
		why         string
		read, total int // blocks, when not skipped and some are
	}{
		{"reason = deadline", quar, true, "reason = deadline (summary)", 0, 0},
		{"reason = deadline", ready, false, "", 1, len(ready.Footer.Blocks)},
		{"area = quarantine", ready, true, "area = quarantine", 0, 0},
		{"segment = x.dlq", ready, true, "segment = x.dlq", 0, 0},
		{"time >= 2026-03-01T12:00:05Z", ready, true, "time >= 2026-03-01T12:00:05Z (footer)", 0, 0},
		{"id = " + tb.Segments[0].Records[2].ID, ready, false, "", 1, len(ready.Footer.Blocks)},
		{"id = " + tb.Segments[0].Records[2].ID, quar, true, "", 0, 0},
		{"id = " + tb.Segments[1].Records[0].ID, quar, false, "", 1, len(quar.Footer.Blocks)},
		{"payload ~ zzqqxxyy", ready, true, "payload ~ zzqqxxyy (summary)", 0, 0},
		{`$.id = "evt_7xyzzy"`, ready, false, "", 1, len(ready.Footer.Blocks)}, // the other block holds an escape: it may
		{"has odd", ready, true, "has odd (summary)", 0, 0},
		{"source ~ bill", quar, true, "source ~ bill (summary)", 0, 0},
		{"reason != failed", quar, false, "", 0, 0},
	} {
		s, err := selection.Parse(c.expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := s.Plan(c.seg)
		if p.Skip != c.skip || c.why != "" && p.Why != c.why {
			t.Errorf("%s on %s: %+v, want skip %v (%s)", c.expr, c.seg.Area, p, c.skip, c.why)
			continue
		}
		if !c.skip && c.read > 0 && c.read < c.total && (p.Blocks == nil || p.Read != c.read) {
			t.Errorf("%s on %s: reads %d blocks (%v), want %d of %d", c.expr, c.seg.Area, p.Read, p.Blocks, c.read, c.total)
		}
	}
	// Without a summary, nothing but times, areas, names and origins is
	// known.
	bare := *ready
	bare.Summary = nil
	s, _ := selection.Parse("reason = nope", nil)
	if p := s.Plan(&bare); p.Skip || p.Blocks != nil {
		t.Fatalf("without a summary: %+v", p)
	}
}

func TestAreasAndSegments(t *testing.T) {
	all := []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive}
	for _, c := range []struct {
		expr  string
		areas string
		named bool
		segs  string
		only  bool
	}{
		{"reason = x", "ready,quarantine,archive", false, "", false},
		{"area = quarantine", "quarantine", true, "", false},
		{"area != ready and reason = x", "quarantine,archive", true, "", false},
		{"segment in (b.dlq, a.dlq) and reason = x", "ready,quarantine,archive", false, "a.dlq,b.dlq", true},
		{"segment = a.dlq or segment = c.dlq", "ready,quarantine,archive", false, "a.dlq,c.dlq", true},
		{"segment = a.dlq or reason = x", "ready,quarantine,archive", false, "", false},
		{"segment = a.dlq and segment in (a.dlq, b.dlq)", "ready,quarantine,archive", false, "a.dlq", true},
	} {
		s, err := selection.Parse(c.expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		var as []string
		for _, a := range s.Areas(all...) {
			as = append(as, a.String())
		}
		names, only := s.Segments()
		if strings.Join(as, ",") != c.areas || s.NamesArea() != c.named || strings.Join(names, ",") != c.segs || only != c.only {
			t.Errorf("%s: areas %v (named %v), segments %v (%v)", c.expr, as, s.NamesArea(), names, only)
		}
	}
}

func TestBuilt(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	js, err := selection.JSON("$.a", "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := selection.And(selection.TimeRange(since, time.Time{}), selection.Where(map[string]string{"b": "2", "a": "x y"}), selection.Contains("t"), js, nil, selection.All())
	want := `time >= 2026-03-01T12:00:00Z and a = "x y" and b = 2 and payload ~ t and $.a = 1`
	if s.String() != want {
		t.Fatalf("String() = %q, want %q", s.String(), want)
	}
	if !selection.And().IsAll() || !selection.Where(nil).IsAll() || selection.Contains("").String() != "" {
		t.Fatal("empty selections select something else")
	}
	if _, err := selection.JSON("$..", "", nil); !errors.Is(err, selection.ErrPath) {
		t.Fatalf("bad path: %v", err)
	}
}

func TestExplain(t *testing.T) {
	s, err := selection.Parse("reason = failed and payload ~ ord-07 and time >= 2026-01-01 and not source = x", nil)
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Explain()
	for _, want := range []string{"selection: reason = failed and payload ~ ord-07", "header's value", "trigram", "footer's time ranges", "negation"} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain() lacks %q:\n%s", want, ex)
		}
	}
}

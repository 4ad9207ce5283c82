package selection_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/selection/selectiontest"
	"github.com/dlqdump/dlqdump/sink"
)

// FuzzParse feeds expressions to Parse: it never panics; an error is an
// *Error inside the expression; an expression that parses prints as one
// that parses to the same print, which matches the records the same way,
// and plans without panicking.
//
//	go test -run '^$' -fuzz FuzzParse ./selection
func FuzzParse(f *testing.F) {
	tb := selectiontest.Load(f)
	for _, c := range tb.Cases {
		f.Add(c.Expr)
	}
	f.Add(`not not (a = "x" or $.b[0]["c d"] != 1) and time <= now-1w2d3h and id not in (0123456789abcdef01234567-0)`)
	hdr := segment.Header{ID: segment.ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	recs := []segment.Record{
		{Seq: 0, Time: 1e18, Payload: []byte(`{"a":"x","b":[{"c d":1}],"id":"evt"}`)},
		{Seq: 1, Time: 2e18, Payload: []byte(`not json`)},
	}
	ft := &segment.Footer{Records: 2, MinTime: time.Unix(0, 1e18), MaxTime: time.Unix(0, 2e18),
		Blocks: []segment.BlockInfo{{Count: 1, MinTime: 1e18, MaxTime: 1e18}, {FirstSeq: 1, Count: 1, MinTime: 2e18, MaxTime: 2e18}}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := selection.Parse(expr, &selection.Options{Now: now})
		if err != nil {
			var se *selection.Error
			if !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(expr) || se.Expr != expr {
				t.Fatalf("Parse(%q): %v (%#v)", expr, err, se)
			}
			_ = se.Caret()
			return
		}
		printed := s.String()
		again, err := selection.Parse(printed, &selection.Options{Now: now})
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", expr, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("%q prints %q, which prints %q", expr, printed, again.String())
		}
		seg := &selection.Segment{Area: sink.AreaReady, Name: "a.dlq", Header: &hdr, Footer: ft}
		for i := range recs {
			if s.Match(seg, &recs[i]) != again.Match(seg, &recs[i]) {
				t.Fatalf("%q and its print %q match record %d otherwise", expr, printed, i)
			}
		}
		s.Plan(seg)
		s.Plan(&selection.Segment{Area: sink.AreaQuarantine})
		_ = s.Explain()
	})
}

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/selection/selectiontest"
)

// TestSelectCases runs the selection language's shared table through the
// console's search (select=): the records the library and dlqdump cat
// select, and the same errors (400, naming the column).
func TestSelectCases(t *testing.T) {
	tb := selectiontest.Load(t)
	dir := t.TempDir()
	tb.Write(t, &fs.Reader{Directory: dir})
	srv, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	for _, c := range tb.Cases {
		t.Run(c.Expr, func(t *testing.T) {
			var p struct {
				Records []struct {
					ID string `json:"id"`
				} `json:"records"`
				Selection string `json:"selection"`
				Error     string `json:"error"`
				Done      bool   `json:"done"`
			}
			code := getJSON(t, srv, "records", url.Values{"select": {c.Expr}, "area": {"all"}, "n": {"200"}}, &p)
			if c.Error != "" {
				if code != http.StatusBadRequest || !strings.Contains(p.Error, c.Error) || !strings.Contains(p.Error, fmt.Sprintf("at column %d", c.Column)) {
					t.Fatalf("status %d, error %q; want 400 with %q at column %d", code, p.Error, c.Error, c.Column)
				}
				return
			}
			if code != http.StatusOK || !p.Done {
				t.Fatalf("status %d: %+v", code, p)
			}
			if c.String != nil && p.Selection != *c.String {
				t.Fatalf("selection %q, want %q", p.Selection, *c.String)
			}
			var got []string
			for _, r := range p.Records {
				got = append(got, tb.ByID(r.ID))
			}
			if g, w := strings.Join(selectiontest.Sorted(got), ","), strings.Join(selectiontest.Sorted(c.Match), ","); g != w {
				t.Fatalf("records %s, want %s", g, w)
			}
		})
	}
}

// TestSearchSkips: a search whose selection the summaries rule out in
// every segment but one reads that one only, and says how many it skipped.
func TestSearchSkips(t *testing.T) {
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 4000, segment: 500, needleAt: 3210})
	srv, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	var p struct {
		Records []struct {
			ID  string `json:"id"`
			Seq uint64 `json:"seq"`
		} `json:"records"`
		Segments      int  `json:"segments"`
		Skipped       int  `json:"skipped_segments"`
		SkippedBlocks int  `json:"skipped_blocks"`
		Done          bool `json:"done"`
	}
	for _, q := range []url.Values{{"select": {"n = 3210"}}, {"q": {needle}}, {"select": {`$.oncall_note = "` + needle + `"`}}} {
		getJSON(t, srv, "records", q, &p)
		if len(p.Records) != 1 || !p.Done || p.Segments != 1 || p.Skipped != 7 {
			t.Errorf("%v: %d records, %d segments read, %d skipped (%d blocks), want 1, 1, 7", q, len(p.Records), p.Segments, p.Skipped, p.SkippedBlocks)
		}
	}
	id := p.Records[0].ID
	getJSON(t, srv, "records", url.Values{"select": {"id = " + id}}, &p)
	if len(p.Records) != 1 || p.Records[0].ID != id || p.Segments != 1 || p.Skipped != 7 {
		t.Errorf("id = %s: %+v", id, p)
	}
}

// TestOverviewCountsAsStat: the overview counts the records a partly
// restored segment still holds, as stat and api/count do, by reason too,
// and its oldest is the oldest of those (the overview counted the
// delivered ones as ready).
func TestOverviewCountsAsStat(t *testing.T) {
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 900, segment: 300, needleAt: -1})
	var got []any
	dest := enqueuerFunc(func(x any) error { got = append(got, x); return nil })
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dest})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{Limit: 100})
	if err != nil || rep.Delivered != 100 {
		t.Fatalf("restore of 100: %+v, %v", rep, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	srv, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	var o struct {
		Areas map[string]struct {
			Records uint64 `json:"records"`
		} `json:"areas"`
		Oldest  time.Time `json:"oldest"`
		Reasons struct {
			Series []struct {
				Name  string `json:"name"`
				Total uint64 `json:"total"`
			} `json:"series"`
		} `json:"by_reason"`
		Charts struct {
			Complete bool `json:"complete"`
		} `json:"charts"`
	}
	for range 100 {
		getJSON(t, srv, "overview", nil, &o)
		if o.Charts.Complete {
			break
		}
	}
	var count struct {
		Count uint64 `json:"count"`
	}
	getJSON(t, srv, "count", url.Values{"area": {"ready"}}, &count)
	if o.Areas["ready"].Records != 800 || count.Count != 800 {
		t.Errorf("ready records: overview %d, api/count %d, want 800 (100 of 900 delivered)", o.Areas["ready"].Records, count.Count)
	}
	totals := map[string]uint64{}
	for _, s := range o.Reasons.Series {
		totals[s.Name] = s.Total
	}
	// Records 100 to 899: reasons cycle failed, leak, deadline from 0.
	if totals["failed"] != 266 || totals["leak"] != 267 || totals["deadline"] != 267 {
		t.Errorf("by reason %v, want failed 266, leak 267, deadline 267", totals)
	}
	// The oldest record left is record 100: the first of the page after
	// the delivered ones.
	var pg struct {
		Records []struct {
			Time    time.Time         `json:"time"`
			Headers map[string]string `json:"headers"`
		} `json:"records"`
	}
	getJSON(t, srv, "records", url.Values{"n": {"1"}}, &pg)
	if len(pg.Records) != 1 || pg.Records[0].Headers["n"] != "100" || !o.Oldest.Equal(pg.Records[0].Time) {
		t.Errorf("oldest %s; the first record left: %+v", o.Oldest, pg.Records)
	}
}

type enqueuerFunc func(any) error

func (f enqueuerFunc) Enqueue(x any) error { return f(x) }

// TestTwoOf71 is the goal of the summaries: a selection whose header value
// lives in 2 of 71 segments reads at most 4 of them (here: those 2), for
// a page of records and for a count.
func TestTwoOf71(t *testing.T) {
	dir := t.TempDir()
	w := &fs.Writer{Directory: dir}
	for s := range 71 {
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: dlqdump.Megabyte})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			h := dlqdump.Headers{"tenant": fmt.Sprintf("t%d", (s*200+i)%97), "order": fmt.Sprintf("ord-%d-%d", s, i)}
			if (s == 17 || s == 58) && i%50 == 7 {
				h["tenant"] = "acme-rare"
			}
			if err := q.Enqueue(dlqdump.Envelope{Item: []byte(fmt.Sprintf(`{"seg":%d,"i":%d}`, s, i)), Headers: h}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	for _, q := range []url.Values{{"select": {"tenant = acme-rare"}}, {"where": {"tenant=acme-rare"}}, {"select": {"order = ord-58-7"}}} {
		var p struct {
			Records  []json.RawMessage `json:"records"`
			Segments int               `json:"segments"`
			Skipped  int               `json:"skipped_segments"`
			Done     bool              `json:"done"`
		}
		getJSON(t, srv, "records", q, &p)
		want := 8
		if q.Get("select") == "order = ord-58-7" {
			want = 1
		}
		if !p.Done || len(p.Records) != want || p.Segments > 4 || p.Segments+p.Skipped != 71 {
			t.Errorf("%v: %d records, %d of 71 segments read (%d skipped), done %v", q, len(p.Records), p.Segments, p.Skipped, p.Done)
		}
		var c struct {
			Count    uint64 `json:"count"`
			Segments int    `json:"segments"`
		}
		getJSON(t, srv, "count", q, &c)
		if c.Count != uint64(want) || c.Segments > 4 {
			t.Errorf("%v: count %d, %d segments read", q, c.Count, c.Segments)
		}
	}
}

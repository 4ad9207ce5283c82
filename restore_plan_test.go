package dlqdump_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// dumpTenants dumps segs segments of 100 records each into dir; records 7,
// 57 of segments rare get the header tenant=acme-rare, the others one of
// 97 tenants.
func dumpTenants(t *testing.T, dir string, segs int, rare ...int) {
	t.Helper()
	for s := range segs {
		q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte})
		for i := range 100 {
			h := dlqdump.Headers{"tenant": fmt.Sprintf("t%d", (s*100+i)%97)}
			for _, r := range rare {
				if s == r && i%50 == 7 {
					h["tenant"] = "acme-rare"
				}
			}
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%d", s, i), Headers: h}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSelectivePassSkipsSegments: a pass selecting a header value that
// lives in 2 of 20 segments claims and reads those 2 only (the others
// keep no claim record), delivers what it selects, and counts the others
// in SkippedSegments; a quarantine pass releases only the quarantined
// segments that may hold a selected record.
func TestSelectivePassSkipsSegments(t *testing.T) {
	dir := t.TempDir()
	dumpTenants(t, dir, 20, 4, 15)
	rd := &fs.Reader{Directory: dir}
	var n atomic.Int64
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: queueFunc(func(any) error { n.Add(1); return nil })})
	sel, err := selection.Parse("tenant = acme-rare", nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != 4 || n.Load() != 4 || rep.SkippedSegments != 18 || rep.LeftSegments != 2 {
		t.Fatalf("report %+v, %d delivered", rep, n.Load())
	}
	var recs int
	for range rd.RecordNames(context.Background()) {
		recs++
	}
	if recs != 2 {
		t.Fatalf("%d segments have a claim record; the pass should have claimed 2", recs)
	}

	// Quarantined: only the segments that may hold one are released.
	qdir := t.TempDir()
	dumpTenants(t, qdir, 6, 2)
	qrd := &fs.Reader{Directory: qdir}
	for si, err := range qrd.List(context.Background(), sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		if err := qrd.Move(context.Background(), si.Name, sink.AreaReady, sink.AreaQuarantine, "test"); err != nil {
			t.Fatal(err)
		}
	}
	n.Store(0)
	r2 := newRestorer(t, dlqdump.Config{Reader: qrd, Queue: queueFunc(func(any) error { n.Add(1); return nil })})
	rep, err = r2.Run(context.Background(), dlqdump.RunOptions{Select: sel, Area: dlqdump.AreaQuarantine})
	if err != nil {
		t.Fatal(err)
	}
	var quarantined int
	for range qrd.List(context.Background(), sink.AreaQuarantine) {
		quarantined++
	}
	if rep.Delivered != 2 || rep.SkippedSegments != 5 || quarantined != 5 {
		t.Fatalf("quarantine pass: %+v; %d still quarantined, want 5", rep, quarantined)
	}
}

// TestFullSegmentsKeepSummaries: a Queue seals a segment before a block
// whose summary would not fit Capacity, so that segments filled to
// Capacity keep summaries that rule out a rare text everywhere but where
// it is. (Before, the summary was squeezed into what the blocks left:
// every segment kept a summary of a few bytes, and every one was read.)
func TestFullSegmentsKeepSummaries(t *testing.T) {
	dir := t.TempDir()
	g := gen.New(3)
	const capacity = dlqdump.Megabyte
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: capacity})
	for i := range 60000 {
		p := g.Event(300)
		if i == 32345 {
			p = []byte(`{"note":"needle-7f3a9c"}`)
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: p, Headers: dlqdump.Headers{"n": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	sel, _ := selection.Parse(`payload ~ "needle-7f3a9c"`, nil)
	var segs, read int
	for _, path := range segmentsIn(t, dir) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		if st.Size() > int64(capacity) {
			t.Fatalf("%s: %d bytes, Capacity %d", path, st.Size(), capacity)
		}
		r, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := r.Summary()
		if sum == nil || err != nil {
			t.Fatalf("%s: no summary (%v)", path, err)
		}
		hdr := r.Header()
		if !sel.SkipSegment(&selection.Segment{Header: &hdr, Footer: r.Footer(), Summary: sum}) {
			read++
		}
		segs++
		f.Close()
	}
	if segs < 4 || read > 1 {
		t.Fatalf("a rare text is read in %d of %d segments, want 1", read, segs)
	}
}

// TestSummarizeHandover: dlqdump summarize stopped after it published the
// copy of a ready, unencrypted segment (with a summary, the same blocks)
// and before it removed the original: a restorer finds the copy named in
// the original's progress, removes the original and restores the copy,
// every record once.
func TestSummarizeHandover(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("h", 50)
	dumpItems(t, dir, dlqdump.Config{Capacity: dlqdump.Megabyte, NoSummary: true}, items)
	rd := &fs.Reader{Directory: dir}
	ctx := context.Background()
	var orig string
	for si := range rd.List(ctx, sink.AreaReady) {
		orig = si.Name
	}
	f, err := rd.Open(ctx, sink.AreaReady, orig)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := segment.NewReader(f, f.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := segment.NewID(sr.Header().Created)
	copyName := segment.FileName(sr.Header().Created, id)
	cl, err := claims.NewClaimer(rd, "summarize", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cl.Claim(ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Reserve(ctx, copyName, orig); err != nil {
		t.Fatal(err)
	}
	p := claims.Progress{Successor: copyName}
	if err := c.Save(ctx, p.Marshal()); err != nil {
		t.Fatal(err)
	}
	sw, err := rd.Create(ctx, sink.AreaReady, copyName)
	if err != nil {
		t.Fatal(err)
	}
	if err := segment.AddSummary(sw, sr, id, sr.Header().Created); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: d})
	for range 3 {
		if _, err := r.Run(ctx, dlqdump.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := d.got()
	slices.Sort(got)
	if !slices.Equal(got, items) {
		t.Fatalf("delivered %d records, want each of %d once", len(got), len(items))
	}
	for si := range rd.List(ctx, sink.AreaReady) {
		t.Fatalf("left ready: %s", si.Name)
	}
}

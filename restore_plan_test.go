package dlqdump_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
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

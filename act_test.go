package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// Per-record actions: replaying a few records now and discarding a few,
// both selective passes over their IDs (RunOptions.Select "id in (...)",
// RunOptions.Discard), under the claims of the segments they touch.

// actStore holds segments of records "s<segment>-<seq>", 12 records of
// about 100 bytes each per block, and their IDs by item.
type actStore struct {
	st  *memsink.Store
	ids map[string]dlqdump.RecordID
	all []string
}

func newActStore(t testing.TB, segments, records int) *actStore {
	t.Helper()
	s := &actStore{st: memsink.New(), ids: map[string]dlqdump.RecordID{}}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range segments {
		created := base.Add(time.Duration(i) * time.Minute)
		hdr := segment.Header{Codec: segment.CodecZstd, Created: created, ID: segment.NewID(created)}
		sw, err := s.st.Create(t.Context(), sink.AreaReady, segment.FileName(created, hdr.ID))
		if err != nil {
			t.Fatal(err)
		}
		w, err := segment.NewWriter(sw, hdr, &segment.WriterOptions{BlockSize: 1200})
		if err != nil {
			t.Fatal(err)
		}
		for j := range records {
			it := fmt.Sprintf("s%d-%03d-%s", i, j, strings.Repeat("x", 90))
			if err := w.Add(created.Add(time.Duration(j)*time.Millisecond), map[string]string{"reason": "failed"}, []byte(it)); err != nil {
				t.Fatal(err)
			}
			s.ids[it] = hdr.RecordID(&segment.Record{Seq: uint64(j)})
			s.all = append(s.all, it)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// sel selects the records of items by their IDs.
func (s *actStore) sel(t testing.TB, items ...string) *selection.Selection {
	ids := make([]segment.RecordID, len(items))
	for i, it := range items {
		ids[i] = s.ids[it]
	}
	return selection.IDs(ids...)
}

// quarantined returns the records in the quarantine with their quarantine
// headers and IDs.
func quarantined(t testing.TB, rd sink.Reader) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for si, err := range rd.List(t.Context(), sink.AreaQuarantine) {
		if err != nil {
			t.Fatal(err)
		}
		f, err := rd.Open(t.Context(), sink.AreaQuarantine, si.Name)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := segment.NewReader(f, f.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		hdr := sr.Header()
		for {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			why, _ := rec.Headers.Get(dlqdump.HeaderQuarantine)
			out[string(rec.Payload)] = append(out[string(rec.Payload)], why+" | "+dlqdump.RecordIDOf(&hdr, &rec).String())
		}
		_ = f.Close()
	}
	return out
}

// counting counts MetricsWriter.Quarantine and Restore calls.
type counting struct {
	dlqdump.NopMetrics
	mu                    sync.Mutex
	quarantined, restored map[string]int
}

func (c *counting) Quarantine(reason string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.quarantined == nil {
		c.quarantined = map[string]int{}
	}
	c.quarantined[reason] += n
}

func (c *counting) Restore(n, _ int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.restored == nil {
		c.restored = map[string]int{}
	}
	c.restored[""] += n
}

func TestDiscardAndReplayByID(t *testing.T) {
	s := newActStore(t, 2, 40)
	d := &dest{}
	mw := &counting{}
	r := newRestorer(t, dlqdump.Config{Reader: s.st, Queue: d, MetricsWriter: mw})
	ctx := t.Context()

	// Replay one record out of the middle of a segment.
	rep, err := r.Run(ctx, dlqdump.RunOptions{Select: s.sel(t, s.all[17])})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.items, []string{s.all[17]}) || rep.Delivered != 1 {
		t.Fatalf("replaying %s delivered %q (report %+v)", s.all[17], d.items, rep)
	}
	// Discard two records of the other segment and one of the first.
	discard := []string{s.all[45], s.all[46], s.all[3]}
	rep, err = r.Run(ctx, dlqdump.RunOptions{Select: s.sel(t, discard...), Discard: "by alice@ops-1: duplicates of ord-7"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Quarantined != 3 || rep.Delivered != 0 || len(d.items) != 1 {
		t.Fatalf("discard: report %+v, destination %q", rep, d.items)
	}
	q := quarantined(t, s.st)
	for _, it := range discard {
		if len(q[it]) != 1 || q[it][0] != "discarded: by alice@ops-1: duplicates of ord-7 | "+s.ids[it].String() {
			t.Fatalf("%s in the quarantine: %q", it, q[it])
		}
	}
	if len(q) != 3 {
		t.Fatalf("the quarantine holds %d records, want the 3 discarded", len(q))
	}
	// A full restore delivers every other record, once.
	if _, err := r.Run(ctx, dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(s.all), func(it string) bool { return slices.Contains(discard, it) })
	got := slices.Clone(d.items)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %d records, want the %d not discarded, each once", len(got), len(want))
	}
	// Counted once their segments are finished, as every record set
	// aside is (exactly once, whoever finishes them).
	if mw.quarantined[dlqdump.DiscardLabel] != 3 {
		t.Fatalf("metrics: %v, want 3 %s", mw.quarantined, dlqdump.DiscardLabel)
	}
	// Released from the quarantine, the discarded records are restorable.
	for si, err := range s.st.List(ctx, sink.AreaQuarantine) {
		if err != nil {
			t.Fatal(err)
		}
		if err := s.st.Move(ctx, si.Name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Run(ctx, dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(d.items); n != len(s.all) {
		t.Fatalf("after a release and a restore, %d delivered, want %d", n, len(s.all))
	}
}

func TestDiscardNeedsASelection(t *testing.T) {
	s := newActStore(t, 1, 5)
	r := newRestorer(t, dlqdump.Config{Reader: s.st, Queue: &dest{}})
	for _, opts := range []dlqdump.RunOptions{
		{Discard: "everything"},
		{Discard: "quarantined", Area: dlqdump.AreaQuarantine, Select: s.sel(t, s.all[0])},
	} {
		if _, err := r.Run(t.Context(), opts); !errors.Is(err, dlqdump.ErrConfig) {
			t.Fatalf("%+v: %v, want ErrConfig", opts, err)
		}
	}
}

// TestActFaults fails every sink call of a replay of one record and a
// discard of two, the k-th for every k, without effect and after taking
// effect; a restorer without faults then restores the rest. The replayed
// record is delivered (again at most a block's worth when its pass was
// interrupted), the discarded ones are in the quarantine once and never
// delivered, every other record is delivered, and nothing is left.
func TestActFaults(t *testing.T) {
	const segs, recs = 2, 40
	replay := "s0-017-" + strings.Repeat("x", 90)
	discard := []string{"s1-005-" + strings.Repeat("x", 90), "s0-030-" + strings.Repeat("x", 90)}
	scenario := func(in *faults.Injector) (*actStore, *dest, int) {
		s := newActStore(t, segs, recs)
		d := &dest{}
		rd := faults.WrapReader(s.st, in)
		c := dlqdump.Config{Reader: rd, Queue: d, Decoder: decoder.Fallthrough{AsString: true}, Lease: 100 * time.Millisecond, Owner: "faulted"}
		r, err := dlqdump.NewRestorer(&c)
		if err != nil {
			t.Fatal(err)
		}
		failures := 0
		if _, err := r.Run(t.Context(), dlqdump.RunOptions{Select: s.sel(t, replay)}); err != nil {
			failures++
		}
		if _, err := r.Run(t.Context(), dlqdump.RunOptions{Select: s.sel(t, discard...), Discard: "by test: poison"}); err != nil {
			failures++
		}
		_ = r.Close()
		return s, d, failures
	}
	check := func(t *testing.T, s *actStore, d *dest, failures int) {
		t.Helper()
		// The pass that was interrupted is left to its lease; a
		// restorer without faults finishes the work after it.
		fin := newRestorer(t, dlqdump.Config{Reader: s.st, Queue: d, Lease: 100 * time.Millisecond, Owner: "finisher"})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		// A discard that failed is done again, as its user would (the
		// command line exits 1 saying so), once the claims it left
		// expire.
		for len(quarantined(t, s.st)) < len(discard) {
			if _, err := fin.Run(ctx, dlqdump.RunOptions{Select: s.sel(t, discard...), Discard: "by test: poison"}); err != nil && ctx.Err() != nil {
				t.Fatalf("discarding again: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for {
			if _, err := fin.Run(ctx, dlqdump.RunOptions{}); err != nil && ctx.Err() != nil {
				t.Fatalf("finishing: %v", err)
			}
			if len(s.st.Names(sink.AreaReady)) == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond) // a claim left by the faulted pass expires
		}
		times := map[string]int{}
		for _, it := range d.items {
			times[it]++
		}
		q := quarantined(t, s.st)
		for _, it := range s.all {
			switch {
			case slices.Contains(discard, it):
				if times[it] > 0 || len(q[it]) != 1 {
					t.Errorf("discarded %s: delivered %d times, in the quarantine %d times", it, times[it], len(q[it]))
				}
			case times[it] == 0:
				t.Errorf("%s was never delivered", it)
			case len(q[it]) > 0:
				t.Errorf("%s is in the quarantine", it)
			}
		}
		// Each interrupted pass may deliver at most one block again.
		dup := len(d.items) - len(times)
		if dup > failures*12 {
			t.Errorf("%d records delivered twice after %d failed passes", dup, failures)
		}
		if got := len(q); got != len(discard) {
			t.Errorf("the quarantine holds %d records, want %d", got, len(discard))
		}
	}
	in := faults.New()
	s, d, failures := scenario(in)
	if failures != 0 {
		t.Fatal("the scenario failed without a fault")
	}
	check(t, s, d, 0)
	counts := in.Counts()
	points := faults.All(counts, faults.Fail, faults.Lost)
	if testing.Short() {
		points = faults.Sample(counts, 4, faults.Fail, faults.Lost)
	}
	t.Logf("%d calls %v; %d points", counts.Total(), counts, len(points))
	for _, p := range points {
		t.Run(p.String(), func(t *testing.T) {
			s, d, failures := scenario(faults.New(p))
			check(t, s, d, failures)
		})
	}
}

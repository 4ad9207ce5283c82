package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Issue 30, point 1: what a holder makes visible on behalf of its claim
// when it finishes a segment (prune's delete, a move to quarantine) must be
// conditional on the claim when it takes effect. A holder stalled between
// its fencing write and its effect, past its lease, must neither lose a
// segment another holder took over uncounted nor move one that was
// restored meanwhile.

// once returns a hook that runs f the first time op is called on a ready
// segment, and does nothing after.
func once(op string, f func()) func(string, sink.Area, string) {
	var o sync.Once
	return func(got string, area sink.Area, _ string) {
		if got == op && area == sink.AreaReady {
			o.Do(f)
		}
	}
}

// fenceStores runs f on a directory, on gofakes3 and on versitygw (skipped
// when there is none).
func fenceStores(t *testing.T, f func(t *testing.T, rd sink.Reader)) {
	t.Run("dir", func(t *testing.T) { f(t, &fs.Reader{Directory: t.TempDir()}) })
	t.Run("gofakes3", func(t *testing.T) {
		srv, stop, err := s3test.NewFake(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		f(t, &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: s3test.UniquePrefix(t.Name())})
	})
	t.Run("versitygw", func(t *testing.T) {
		srv := s3test.VersityFor(t, nil)
		f(t, &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: s3test.UniquePrefix(t.Name())})
	})
}

// seedSegment writes one sealed segment of n records of data version v
// into rd's ready area, dated created, their reason tag; it returns its
// name and payloads.
func seedSegment(t *testing.T, rd sink.Reader, created time.Time, v dlqdump.Version, tag string, n int) (string, []string) {
	t.Helper()
	id := segment.NewID(created)
	name := segment.FileName(created, id)
	sw, err := rd.Create(t.Context(), sink.AreaReady, name)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, DataVersion: uint64(v), Created: created, ID: id}, &segment.WriterOptions{BlockSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%s-%05d", tag, i)
		if err := sg.Add(created, map[string]string{dlqdump.HeaderReason: tag}, []byte(items[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := sg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return name, items
}

// recordNames lists the names with a claim record in rd.
func recordNames(t *testing.T, rd sink.Reader) []string {
	t.Helper()
	var out []string
	for n, err := range rd.RecordNames(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// deliveredOnce returns how many deliveries to dst were repeats, how many
// of items were never delivered, and the deliveries in all.
func deliveredOnce(dst *countingDest, items []string) (dups, missing, total int) {
	dups, total = dst.twice()
	for _, it := range items {
		if dst.n[it] == 0 {
			missing++
		}
	}
	return dups, missing, total
}

// noRecordsLeft fails t if rd keeps a claim record.
func noRecordsLeft(t *testing.T, rd sink.Reader) {
	t.Helper()
	if left := recordNames(t, rd); len(left) > 0 {
		t.Errorf("claim records left: %v", left)
	}
}

// expireCount counts what the retention reports expired.
type expireCount struct {
	dlqdump.NopMetrics
	records, segments atomic.Int64
}

func (m *expireCount) Expire(_, _ string, records int) {
	m.records.Add(int64(records))
	m.segments.Add(1)
}

// untilEmpty runs passes of r with opts until rd's area is empty, as
// untilDone does.
func untilEmpty(t *testing.T, r *dlqdump.Restorer, rd sink.Reader, opts dlqdump.RunOptions) {
	t.Helper()
	area := sink.AreaReady
	if opts.Area == dlqdump.AreaQuarantine {
		area = sink.AreaQuarantine
	}
	untilDone(t, r, opts, func() bool { return len(areaNames(t, rd, area)) == 0 })
}

// Defect (a): a prune stalled between its fencing write and the delete,
// while a restorer takes the segment over, then goes on. Before the fix the
// taker took the "finishing" record over as any other and opened the
// segment; the prune's delete landed first: 500 of 500 records gone, not
// delivered, the prune's report 0, the expired metric 0, the taker's Open
// got not-found and forgot the segment silently.
func TestStalledPruneNeverDeletesUncounted(t *testing.T) {
	fenceStores(t, func(t *testing.T, rd sink.Reader) {
		const n = 500
		created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		name, items := seedSegment(t, rd, created, 0, "a", n)
		dst := &countingDest{}

		// The prune stops before deleting, after its fencing write.
		pGate := &faults.Hooked{Reader: rd}
		pPaused, pResume := make(chan struct{}), make(chan struct{})
		pGate.Before = once("delete", func() { close(pPaused); <-pResume })
		pm := &expireCount{}
		p := newRestorer(t, dlqdump.Config{Reader: pGate, Queue: dst, Lease: fenceLease, Owner: "prune", MetricsWriter: pm,
			Retention: dlqdump.Retention{Ready: dlqdump.Limits{MaxAge: time.Hour}}})
		type pruned struct {
			rep dlqdump.PruneReport
			err error
		}
		pDone := make(chan pruned, 1)
		go func() {
			rep, err := p.Prune(context.Background(), dlqdump.PruneOptions{})
			pDone <- pruned{rep, err}
		}()
		select {
		case <-pPaused:
		case res := <-pDone:
			t.Fatalf("the prune ended without deleting: %+v, %v", res.rep, res.err)
		}

		// A restorer takes the segment over once the prune's lease is
		// over; the prune goes on just as the taker would open it.
		var pRes pruned
		var resumeOnce sync.Once
		resume := func() {
			resumeOnce.Do(func() {
				close(pResume)
				pRes = <-pDone
			})
		}
		tGate := &faults.Hooked{Reader: rd}
		tGate.Before = once("open", resume)
		tm := &expireCount{}
		taker := newRestorer(t, dlqdump.Config{Reader: tGate, Queue: dst, Lease: fenceLease, Owner: "taker", MetricsWriter: tm})
		untilEmpty(t, taker, rd, dlqdump.RunOptions{})
		resume()
		t.Logf("the stalled prune: report %+v, error %v; expired counted by the prune %d, by the taker %d; delivered %d",
			pRes.rep, pRes.err, pm.records.Load(), tm.records.Load(), len(dst.n))

		dups, _ := dst.twice()
		delivered := 0
		for _, it := range items {
			if dst.n[it] > 0 {
				delivered++
			}
		}
		expired := pm.records.Load() + tm.records.Load()
		if delivered+int(expired) != n || dups > 0 {
			t.Errorf("%d of %d records gone without a trace: %d delivered (%d twice), %d counted expired (the prune %d, the taker %d); the prune reported %d expired",
				n-delivered-int(expired), n, delivered, dups, expired, pm.records.Load(), tm.records.Load(), len(pRes.rep.Expired))
		}
		if expired > 0 && pm.segments.Load()+tm.segments.Load() != 1 {
			t.Errorf("the expiry of %s counted %d times", name, pm.segments.Load()+tm.segments.Load())
		}
		if left := areaNames(t, rd, sink.AreaReady); len(left) > 0 {
			t.Errorf("ready segments left: %v", left)
		}
		noRecordsLeft(t, rd)
	})
}

// Defect (b): a version-2 restorer stalled between fencing and moving a
// version-1 segment to quarantine, while a version-1 restorer takes it
// over, then goes on. Before the fix the taker restored all 3,000 records,
// the move landed (just before the taker deleted the segment), and
// releasing the quarantine delivered all 3,000 again.
func TestStalledQuarantineMoveNeverLandsAfterTakeover(t *testing.T) {
	fenceStores(t, func(t *testing.T, rd sink.Reader) {
		const n = 3000
		v1, v2 := dlqdump.NewVersion(1, 0, 0, 0), dlqdump.NewVersion(2, 0, 0, 0)
		_, items := seedSegment(t, rd, time.Now().Add(-time.Minute), v1, "b", n)
		dst := &countingDest{}

		aGate := &faults.Hooked{Reader: rd}
		aPaused, aResume := make(chan struct{}), make(chan struct{})
		aGate.Before = once("move", func() { close(aPaused); <-aResume })
		a := newRestorer(t, dlqdump.Config{Reader: aGate, Decoder: poisonDecoder{}, Queue: dst, Lease: fenceLease, Owner: "v2", Version: v2})
		aDone := make(chan error, 1)
		go func() {
			_, err := a.Run(context.Background(), dlqdump.RunOptions{})
			aDone <- err
		}()
		select {
		case <-aPaused:
		case err := <-aDone:
			t.Fatalf("the version-2 restorer ended without moving the segment: %v", err)
		}

		// The version-1 restorer takes it over after the lease; the
		// stalled move goes on just before the taker deletes it.
		var errA error
		var resumeOnce sync.Once
		resume := func() {
			resumeOnce.Do(func() {
				close(aResume)
				errA = <-aDone
			})
		}
		bGate := &faults.Hooked{Reader: rd}
		bGate.Before = once("delete", resume)
		b := newRestorer(t, dlqdump.Config{Reader: bGate, Decoder: poisonDecoder{}, Queue: dst, Lease: fenceLease, Owner: "v1", Version: v1})
		untilEmpty(t, b, rd, dlqdump.RunOptions{})
		resume()
		first := dst.k
		t.Logf("the stalled restorer ended with: %v; %d delivered before the release", errA, first)

		// Release the quarantine: the version-1 restorer restores it.
		untilEmpty(t, b, rd, dlqdump.RunOptions{Area: dlqdump.AreaQuarantine})
		untilEmpty(t, b, rd, dlqdump.RunOptions{})

		if dups, missing, total := deliveredOnce(dst, items); dups > 0 || missing > 0 {
			t.Errorf("%d deliveries of %d records (%d before releasing the quarantine): %d delivered twice, %d never", total, n, first, dups, missing)
		}
		noRecordsLeft(t, rd)
	})
}

// failCount counts what restorers report failed, by reason.
type failCount struct {
	dlqdump.NopMetrics
	mu sync.Mutex
	n  map[string]int
}

func (m *failCount) Fail(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[reason]++
}

func (m *failCount) get(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[reason]
}

// A restorer that takes over a segment's record (a previous holder's
// progress) and finds the segment gone from the ready area says where it
// went and counts it: moved to quarantine by someone without the claim, it
// ends its claim there keeping the progress, so that releasing it resumes
// where it was; removed, it is logged and counted. Before, the record was
// forgotten silently, and a release delivered again what the progress said
// was delivered.
func TestTakerFindingItsSegmentGoneSaysWhereItWent(t *testing.T) {
	fenceStores(t, func(t *testing.T, rd sink.Reader) {
		moved, items := seedSegment(t, rd, time.Now().Add(-2*time.Minute), 0, "m", 400)
		removed, _ := seedSegment(t, rd, time.Now().Add(-time.Minute), 0, "r", 300)
		dst := &countingDest{}
		first := newRestorer(t, dlqdump.Config{Reader: rd, Decoder: poisonDecoder{}, Queue: dst, Lease: fenceLease, Owner: "first", SegmentsInFlight: 1})
		// 100 records of each, then stopped: both keep their progress.
		for _, tag := range []string{"m", "r"} {
			if _, err := first.Run(t.Context(), dlqdump.RunOptions{Limit: 100, Where: dlqdump.Headers{dlqdump.HeaderReason: tag}}); err != nil {
				t.Fatal(err)
			}
		}
		if dst.k != 200 {
			t.Fatalf("%d delivered, want 200", dst.k)
		}
		// Someone without the claims moves one aside and removes the
		// other, as the next restorer, having claimed them, opens them
		// (a holder that stalled past its lease and went on, a person).
		bGate := &faults.Hooked{Reader: rd}
		bGate.Before = func(op string, area sink.Area, name string) {
			if op != "open" || area != sink.AreaReady {
				return
			}
			var err error
			switch name {
			case moved:
				err = rd.Move(t.Context(), moved, sink.AreaReady, sink.AreaQuarantine, "moved by hand")
			case removed:
				err = rd.Delete(t.Context(), sink.AreaReady, removed)
			}
			if err != nil && !errors.Is(err, sink.ErrNotFound) {
				t.Error(err)
			}
		}
		mw := &failCount{}
		b := newRestorer(t, dlqdump.Config{Reader: bGate, Decoder: poisonDecoder{}, Queue: dst, Lease: fenceLease, Owner: "b", MetricsWriter: mw})
		rep, err := b.Run(t.Context(), dlqdump.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bGate.Before = nil
		t.Logf("report %+v", rep)
		if rep.QuarantinedSegments != 1 || rep.Gone != 1 || mw.get("moved_away") != 1 || mw.get("gone") != 1 {
			t.Errorf("report %+v, fails %v: want one segment found in quarantine and one gone, each counted", rep, mw.n)
		}
		// Released, the moved one resumes where it was.
		untilEmpty(t, b, rd, dlqdump.RunOptions{Area: dlqdump.AreaQuarantine})
		untilEmpty(t, b, rd, dlqdump.RunOptions{})
		if dups, missing, _ := deliveredOnce(dst, items); dups > 0 || missing > 0 {
			t.Errorf("the segment moved aside: %d records delivered twice, %d never", dups, missing)
		}
		noRecordsLeft(t, rd)
	})
}

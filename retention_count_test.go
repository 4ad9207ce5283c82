package dlqdump_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/sink"
)

// expiredCount sums MetricsWriter.Expire.
type expiredCount struct {
	dlqdump.NopMetrics
	mu      sync.Mutex
	records int
	calls   int
}

func (m *expiredCount) Expire(_, _ string, records int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records += records
	m.calls++
}

func (m *expiredCount) get() (records, calls int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records, m.calls
}

// Issue 19, defect 6: a segment with a damaged block has its intact records
// delivered and is quarantined, its record keeping that progress. Expiring
// it from the quarantine counts the records never delivered (those of the
// damaged block), in the report, the metric and the log, not all of them.
func TestExpireQuarantinedCountsUndelivered(t *testing.T) {
	dir := t.TempDir()
	items, name := damagedSegment(t, dir)
	dst := &dest{}
	if err := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst}).Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir, sink.AreaQuarantine); len(got) != 1 || got[0] != name {
		t.Fatalf("quarantine holds %q, want the damaged segment", got)
	}
	delivered := len(dst.got())
	if delivered == 0 || delivered >= len(items) {
		t.Fatalf("%d of %d delivered", delivered, len(items))
	}
	mw := &expiredCount{}
	var logs bytes.Buffer
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: &dest{}, MetricsWriter: mw,
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		Retention: dlqdump.Retention{Quarantine: dlqdump.Limits{MaxAge: time.Hour}}})
	rep, err := r.Prune(t.Context(), dlqdump.PruneOptions{Now: time.Now().Add(48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := len(items) - delivered
	if len(rep.Expired) != 1 || rep.Expired[0].Records != uint64(want) {
		t.Errorf("report %+v, want one segment of %d records never delivered (%d of %d were)", rep.Expired, want, delivered, len(items))
	}
	if n, _ := mw.get(); n != want {
		t.Errorf("metric counts %d records expired, want %d", n, want)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("records=%d ", want)) {
		t.Errorf("log does not say %d records:\n%s", want, logs.String())
	}
}

// expiryScenario seeds one segment of 10 records in area and returns a
// Restorer config whose retention expires it.
func expiryScenario(t *testing.T, dir string, area sink.Area) (dlqdump.Config, dlqdump.PruneOptions) {
	t.Helper()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	seedAged(t, dir, area, base, 1)
	lim := dlqdump.Limits{MaxAge: time.Hour}
	c := dlqdump.Config{Queue: &dest{}, Owner: "pruner"}
	switch area {
	case sink.AreaReady:
		c.Retention.Ready = lim
	case sink.AreaQuarantine:
		c.Retention.Quarantine = lim
	default:
		c.Retention.Archive = lim
	}
	return c, dlqdump.PruneOptions{Now: base.Add(100 * time.Hour)}
}

// Issue 19, defect 5: every call prune makes to the store fails, once,
// without effect or taking effect and reporting failure (as when the answer
// of a delete is lost); then a later prune runs. The segment ends removed,
// and its records are counted as expired exactly once over both prunes, in
// the reports and the metric. (Before, a delete whose answer was lost made
// prune return an error and count nothing, and the later prune found the
// segment gone: counted nowhere.)
func TestExpiryCountedOnceUnderFaults(t *testing.T) {
	for _, area := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		t.Run(area.String(), func(t *testing.T) {
			count := faults.New()
			{
				dir := t.TempDir()
				c, opts := expiryScenario(t, dir, area)
				c.Reader = faults.WrapReader(&fs.Reader{Directory: dir}, count)
				if _, err := newRestorer(t, c).Prune(t.Context(), opts); err != nil {
					t.Fatal(err)
				}
			}
			points := faults.All(count.Counts(), faults.Fail, faults.Lost)
			if len(points) < 4 {
				t.Fatalf("only %d points: %v", len(points), count.Counts())
			}
			for _, p := range points {
				dir := t.TempDir()
				c, opts := expiryScenario(t, dir, area)
				mw := &expiredCount{}
				c.MetricsWriter = mw
				in := faults.New(p)
				c.Reader = faults.WrapReader(&fs.Reader{Directory: dir}, in)
				first, err1 := newRestorer(t, c).Prune(t.Context(), opts)
				c.Reader = &fs.Reader{Directory: dir}
				later, err2 := newRestorer(t, c).Prune(t.Context(), opts)
				if err2 != nil {
					t.Errorf("%s: the later prune: %v", p, err2)
				}
				if left := names(t, dir, area); len(left) != 0 {
					t.Errorf("%s: %q left after both prunes", p, left)
				}
				var reported uint64
				for _, ex := range append(first.Expired, later.Expired...) {
					reported += ex.Records
				}
				n, _ := mw.get()
				if reported != 10 || n != 10 {
					t.Errorf("%s (fired %v; first prune: %v): reports count %d records expired, the metric %d; want 10 once",
						p, in.Fired(), err1, reported, n)
				}
			}
			t.Logf("%d points", len(points))
		})
	}
}

// cancelInDelete is an fs.Reader whose Delete removes the segment and then
// cancels the prune, as a Close arriving while the delete is under way
// does, and reports what the context it was given says.
type cancelInDelete struct {
	*fs.Reader
	cancel context.CancelFunc
}

func (c *cancelInDelete) Delete(ctx context.Context, area sink.Area, name string) error {
	err := c.Reader.Delete(context.WithoutCancel(ctx), area, name)
	c.cancel()
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// Issue 19, defect 5: a prune cancelled while a delete is under way (a
// Restorer closing) still counts the segment the delete removed.
func TestExpiryCancelledMidDelete(t *testing.T) {
	for _, area := range []sink.Area{sink.AreaReady, sink.AreaArchive} {
		t.Run(area.String(), func(t *testing.T) {
			dir := t.TempDir()
			c, opts := expiryScenario(t, dir, area)
			mw := &expiredCount{}
			c.MetricsWriter = mw
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			c.Reader = &cancelInDelete{Reader: &fs.Reader{Directory: dir}, cancel: cancel}
			rep, err := newRestorer(t, c).Prune(ctx, opts)
			if left := names(t, dir, area); len(left) != 0 {
				t.Fatalf("%q left", left)
			}
			if n, _ := mw.get(); len(rep.Expired) != 1 || rep.Expired[0].Records != 10 || n != 10 {
				t.Fatalf("cancelled mid-delete: report %+v (error %v), metric %d; want the segment's 10 records counted", rep.Expired, err, n)
			}
		})
	}
}

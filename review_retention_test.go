package dlqdump_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// readHook is an fs.Reader that runs a hook once, before the first
// ReadRecord.
type readHook struct {
	*fs.Reader
	once sync.Once
	hook func()
}

func (h *readHook) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	h.once.Do(h.hook)
	return h.Reader.ReadRecord(ctx, name)
}

// expiredMetrics records MetricsWriter.Expire.
type expiredMetrics struct {
	dlqdump.NopMetrics
	mu      sync.Mutex
	records int
}

func (m *expiredMetrics) Expire(_, _ string, records int) {
	m.mu.Lock()
	m.records += records
	m.mu.Unlock()
}

// Prune lists the ready area, then for each segment due reads its footer and
// record and claims it. A segment restored completely by another pass in
// between (the started Restorer's own pass loop runs beside its prune loop)
// has no record left: Claim takes it, Finish finds it deleted and counts
// that as done, and Prune reports, logs and counts as expired every record
// of a segment whose records were all delivered: an alert for a loss that
// did not happen.
func TestReviewPruneCountsARestoredSegmentAsExpired(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("r", 300)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, items)
	dst := &dest{}
	restorer := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Owner: "pass"})
	rh := &readHook{Reader: &fs.Reader{Directory: dir}, hook: func() {
		if err := restorer.Restore(t.Context()); err != nil {
			t.Errorf("restore: %v", err)
		}
	}}
	mw := &expiredMetrics{}
	pruner := newRestorer(t, dlqdump.Config{Reader: rh, Queue: &dest{}, Owner: "prune", MetricsWriter: mw,
		Retention: dlqdump.Retention{Ready: dlqdump.Limits{MaxAge: time.Hour}}})
	rep, err := pruner.Prune(t.Context(), dlqdump.PruneOptions{Now: time.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(dst.got()); n != len(items) {
		t.Fatalf("the pass delivered %d of %d", n, len(items))
	}
	if len(rep.Expired) > 0 || mw.records > 0 {
		t.Fatalf("every record was delivered, yet Prune reports %d segments expired and the metrics %d records expired: %+v", len(rep.Expired), mw.records, rep.Expired)
	}
}

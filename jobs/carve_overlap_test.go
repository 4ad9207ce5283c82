package jobs_test

import (
	"fmt"
	"testing"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// Paced jobs (a Rate: they carve) whose selections overlap, over one store:
// every job completes having delivered its selection, each record once, and
// nothing of their batches is left ready. (A carved side segment another
// job holds is waited for, not taken as delivered by it: see
// TestCarvedSideHeldByAnOverlappingPass, which reproduces that
// interleaving; here it depends on timing.)
func TestOverlappingPacedJobsDeliverOnce(t *testing.T) {
	st := memsink.New()
	dumpBatches(t, st, 5*40, 40, 15)
	d := &dest{}
	js, rn := newRunner(t, st, d, 4)
	for k := range 4 {
		if _, err := js.Create(t.Context(), jobs.Spec{ID: fmt.Sprint("j", k), Select: fmt.Sprintf("batch in (%d, %d)", k, k+1), Rate: 2000}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	var delivered uint64
	for k := range 4 {
		j := waitJob(t, js, fmt.Sprint("j", k))
		if j.State != jobs.Completed {
			t.Fatalf("job %s: %s after %d passes", j.ID, j.State, j.Attempts)
		}
		t.Logf("job %s: %s, %d passes, delivered %d, left %d", j.ID, j.State, j.Attempts, j.Delivered, j.Left)
		delivered += j.Delivered
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n != 200 || len(d.got) != 200 || delivered != 200 {
		t.Errorf("%d deliveries of %d records (the jobs say %d); want the 200 of batches 0 to 4 once each; ready: %v", d.n, len(d.got), delivered, st.Names(sink.AreaReady))
	}
}

package dlqdump_test

import (
	"context"
	"testing"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/faults/dumpfaults"
)

// faultRegressions are the fault points at which the enumeration found a
// defect, each run on its own so that a regression names it. Status says
// whether the defect is fixed.
var faultRegressions = []struct {
	name, scenario, point, defect string
	first                         string // a fault before point, if any
}{
	{"FSCommitRetriedAfterLostAnswer", "fs/buffered", "Segment.Commit#1/lost",
		"fs: a Commit retried after one that took effect failed forever with 'file already closed'; Close hung (fixed in 82d631f)", ""},
	{"ShutdownBoundedWhileWriteHangs", "fs/durable", "Segment.Write#1/stall",
		"issue 11 defect 8: Shutdown waited for a hung Write (fixed in 8aec7c4)", ""},
	{"ShutdownBoundedWhileSyncHangs", "fs/durable", "Segment.Sync#16/stall",
		"issue 11 defect 8: Shutdown waited for a hung Sync (fixed in 8aec7c4)", ""},
	{"ShutdownCountsInFlightDurableRecord", "fs/durable", "Writer.Create#2/stall",
		"issue 11 defect 4: the count and the Durable caller's error disagreed with the store (fixed in 8aec7c4)", ""},
	{"S3CloseStoresBeforeReturning", "s3-memory/buffered", "s3.PutObject#2/lost",
		"issue 11 defect 1: Queue.Close returned before the s3.Writer uploaded (fixed in 8aec7c4, 452f6c6)", ""},
	{"S3SpoolDirCloseStoresBeforeReturning", "s3-spooldir/durable", "Segment.Commit#1/fail",
		"issue 11 defect 1 with SpoolDir (fixed in 8aec7c4, 452f6c6)", ""},
	{"S3CreateMultipartUploadLostLeavesNoUpload", "s3-memory/buffered-multipart", "s3.CreateMultipartUpload#1/lost",
		"s3: a CreateMultipartUpload whose answer was lost leaves an unfinished multipart upload nobody aborts (OPEN)", ""},
	{"S3CrashInMultipartUploadLeavesNoUpload", "s3-spooldir/durable-multipart", "s3.UploadPart#1/crash",
		"s3: a crash during a multipart upload leaves it unfinished after the restart uploaded the segment again (OPEN)", ""},
	{"S3WriterCountsInFlightUploadInDoubt", "s3-memory/buffered", "s3.PutObject#4/stall-after",
		"s3/Queue: a PUT that reached S3 but whose answer had not come when Shutdown gave up is counted as not written (\"lost\"), and it is stored: a caller that dumps those records again stores them twice; it is in doubt (OPEN)", ""},
	{"QueueCountsFailedCommitInDoubt", "s3-memory/buffered", "Segment.Commit#4/stall-after",
		"Queue: a Commit that took effect but had not answered when Shutdown gave up (it then failed) is counted as not written, and the Writer stores it; a failed Commit may have taken effect, so its records are in doubt (OPEN; the upload must finish within Shutdown's 100ms grace for the run to show it)", ""},
}

// TestFaultsRegressions runs each fault point at which the enumeration found
// a defect.
func TestFaultsRegressions(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: child processes and S3")
	}
	h := faultsHarness(t)
	for _, tc := range faultRegressions {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc, err := dumpfaults.ScenarioNamed(tc.scenario)
			if err != nil {
				t.Fatal(err)
			}
			p, err := faults.ParsePoint(tc.point)
			if err != nil {
				t.Fatal(err)
			}
			var r *dumpfaults.Result
			if tc.first != "" {
				first, err := faults.ParsePoint(tc.first)
				if err != nil {
					t.Fatal(err)
				}
				r, err = h.RunAfter(context.Background(), sc, first, p)
				if err != nil {
					t.Fatal(err)
				}
			} else if r, err = h.Run(context.Background(), sc, &p); err != nil {
				t.Fatal(err)
			}
			if !r.Reached {
				t.Fatalf("%s: the fault was not reached: the scenario makes fewer calls now; pick the point again", r)
			}
			for _, v := range r.Violations {
				t.Errorf("%s: %s\n\tdefect: %s", r, v, tc.defect)
			}
		})
	}
}

package jobs_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// The records List keeps on S3 (by ETag) must never stand in for a record
// that changed: these pin what the review of that cache checked.

func listCacheStore(t *testing.T, n int) (*jobs.Store, sink.Records) {
	t.Helper()
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	rd := &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: s3test.UniquePrefix(t.Name())}
	js, err := jobs.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Create(t.Context(), jobs.Spec{ID: fmt.Sprintf("job-%02d", i), Segments: []string{"s"}}); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := rd.Table(jobs.Table)
	if err != nil {
		t.Fatal(err)
	}
	return js, tb
}

// Lists running at once (a console serving several tabs) share the kept
// records: each List started after a job was cancelled shows it cancelled.
func TestListCacheConcurrentListsSeeEachChange(t *testing.T) {
	const n, listers = 12, 4
	js, _ := listCacheStore(t, n)
	ctx := t.Context()
	for i := range n {
		if _, err := js.Cancel(ctx, fmt.Sprintf("job-%02d", i)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range listers {
			wg.Go(func() {
				count := 0
				for j, err := range js.List(ctx) {
					if err != nil {
						t.Error(err)
						return
					}
					count++
					var k int
					fmt.Sscanf(j.ID, "job-%d", &k)
					if want := k <= i; (j.State == jobs.Cancelled) != want {
						t.Errorf("after cancelling job-00..job-%02d, List shows %s %s", i, j.ID, j.State)
					}
				}
				if count != n {
					t.Errorf("List showed %d jobs, want %d", count, n)
				}
			})
		}
		wg.Wait()
	}
}

// A record damaged or removed behind the Store's back after a List kept it:
// the next List reports the damage under the job's ID and leaves the
// removed job out, rather than showing the records it kept.
func TestListCacheDamagedOrRemovedRecord(t *testing.T) {
	const n = 6
	js, tb := listCacheStore(t, n)
	ctx := t.Context()
	for _, err := range js.List(ctx) {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, v, err := tb.ReadRecord(ctx, "j-job-02")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.WriteRecord(ctx, "j-job-02", []byte("not a record"), v); err != nil {
		t.Fatal(err)
	}
	if err := sink.DropRecord(ctx, tb, "j-job-04"); err != nil {
		t.Fatal(err)
	}
	got := map[string]error{}
	for j, err := range js.List(ctx) {
		got[j.ID] = err
	}
	if len(got) != n-1 || got["job-02"] == nil {
		t.Fatalf("List after job-02's record was damaged and job-04's removed: %v; want %d jobs, job-02 an error, no job-04", got, n-1)
	}
	if _, ok := got["job-04"]; ok {
		t.Fatalf("List shows job-04, whose record was removed: %v", got)
	}
}

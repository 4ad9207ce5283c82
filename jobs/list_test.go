package jobs_test

import (
	"fmt"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// On S3, whose listing gives each record's ETag, List reads again only the
// jobs that changed since it last read them: a console refreshing its page
// of jobs costs a listing, not a read per job.
// (On gofakes3 and on versitygw: the ETags their listings give must be the
// ones their reads give.)
func TestListReadsOnlyTheJobsThatChanged(t *testing.T) {
	t.Run("gofakes3", func(t *testing.T) {
		srv, stop, err := s3test.NewFake(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		testListReadsOnlyTheJobsThatChanged(t, srv)
	})
	t.Run("versitygw", func(t *testing.T) {
		testListReadsOnlyTheJobsThatChanged(t, s3test.VersityFor(t, nil))
	})
}

func testListReadsOnlyTheJobsThatChanged(t *testing.T, srv *s3test.Server) {
	var counter s3test.Counter
	client := srv.Client(func(o *awss3.Options) { o.HTTPClient = counter.Wrap(o.HTTPClient) })
	js, err := jobs.Open(&s3.Reader{Client: client, Bucket: srv.Bucket, Prefix: s3test.UniquePrefix("list")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const n = 20
	for i := range n {
		if _, err := js.Create(ctx, jobs.Spec{ID: fmt.Sprintf("job-%02d", i), Segments: []string{"s"}}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() (got map[string]jobs.Job, reads int64) {
		t.Helper()
		before := counter.Counts()
		got = map[string]jobs.Job{}
		for j, err := range js.List(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			got[j.ID] = j
		}
		return got, counter.Counts().Sub(before)["GetObject"]
	}
	if got, reads := list(); len(got) != n || reads != n {
		t.Fatalf("first List: %d jobs in %d reads; want %d in %d", len(got), reads, n, n)
	}
	if got, reads := list(); len(got) != n || reads != 0 {
		t.Fatalf("List again, nothing changed: %d jobs in %d reads; want %d in 0", len(got), reads, n)
	}
	if _, err := js.Cancel(ctx, "job-07"); err != nil {
		t.Fatal(err)
	}
	got, reads := list()
	if len(got) != n || reads != 1 || got["job-07"].State != jobs.Cancelled || got["job-08"].State != jobs.Pending {
		t.Fatalf("List after one job was cancelled: %d jobs in %d reads, job-07 %s; want %d in 1, cancelled", len(got), reads, got["job-07"].State, n)
	}
	// A job created since is read once.
	if _, err := js.Create(ctx, jobs.Spec{ID: "job-99", Segments: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	if got, reads := list(); len(got) != n+1 || reads != 1 {
		t.Fatalf("List after a job was created: %d jobs in %d reads; want %d in 1", len(got), reads, n+1)
	}
}

package changelog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// On S3 a page changes by a conditional PUT (If-Match, If-None-Match):
// concurrent appenders, each with a client of its own, leave every entry
// once in one chain, on gofakes3 and on versitygw.
func TestConcurrentAppendersS3(t *testing.T) {
	t.Run("gofakes3", func(t *testing.T) {
		srv, stop, err := s3test.NewFake(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		testConcurrentAppendersS3(t, srv)
	})
	t.Run("versitygw", func(t *testing.T) {
		testConcurrentAppendersS3(t, s3test.VersityFor(t, nil))
	})
}

func testConcurrentAppendersS3(t *testing.T, srv *s3test.Server) {
	defer changelog.SetPageEntries(8)() // several pages, several page starts raced
	prefix := s3test.UniquePrefix("changelog")
	const appenders, each = 4, 12
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	for w := range appenders {
		wg.Go(func() {
			l := open(t, &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix})
			for i := range each {
				if _, err := l.Append(context.Background(), changelog.Entry{Actor: fmt.Sprint(w), Action: changelog.ActionRelease, Scope: fmt.Sprintf("%d/%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l := open(t, &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix})
	v := verify(t, l)
	if v.Entries != appenders*each || v.Pages != appenders*each/8 {
		t.Fatalf("verified %d entries in %d pages, want %d in %d", v.Entries, v.Pages, appenders*each, appenders*each/8)
	}
	seen := map[string]bool{}
	for _, e := range all(t, l) {
		if seen[e.Scope] {
			t.Fatalf("entry %s twice", e.Scope)
		}
		seen[e.Scope] = true
	}
}

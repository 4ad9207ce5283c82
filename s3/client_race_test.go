package s3_test

import (
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Writers and Readers sharing one client, as in the README, run without a
// data race (issue 11, defect 6; this test finds it under -race): Writers
// start (deriving their client) while a Reader lists.
func TestSharedClientWriterAndReader(t *testing.T) {
	client := fakeServer.Client()
	prefix := "t/shared-client/"
	ctx := testCtx(t, time.Minute)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 30 {
			r := &s3.Reader{Client: client, Bucket: fakeServer.Bucket, Prefix: prefix, Retry: fastRetry}
			for _, err := range r.List(ctx, sink.AreaReady) {
				if err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	for i := range 30 {
		w := &s3.Writer{Client: client, Bucket: fakeServer.Bucket, Prefix: prefix, Retry: fastRetry}
		name, data := buildSegment(t, time.Now(), segment.CodecNone, []byte{byte(i)})
		sw, err := w.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, sw, data)
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
	}
	wg.Wait()
}

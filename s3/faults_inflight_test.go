package s3_test

import (
	"context"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
)

// Found by the fault enumeration (point s3.PutObject#4/stall-after of
// s3-memory/buffered): when Close gives up while a PUT that reached S3 waits
// for its answer, the Writer reports the segment as not uploaded and lost —
// and the Queue counts its records as not written, so a caller that dumps
// them again stores them twice. The segment is in doubt: S3 may have it.
func TestFaultsCloseCountsInFlightUploadAsLost(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		in := faults.New(faults.Point{Op: faults.OpPutObject, K: 1, Mode: faults.StallAfter})
		ctx, cancel := context.WithCancel(testCtx(t, time.Minute))
		in.OnFire = func(faults.Point) { cancel() } // Close's deadline passes while the answer hangs
		client := e.srv.Client(func(o *awss3.Options) { o.HTTPClient = &faults.HTTPClient{Inner: o.HTTPClient, Injector: in} })
		w := &s3.Writer{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte("one"))
		sw, err := w.Create(testCtx(t, time.Minute), name)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, sw, data)
		if err := sw.Commit(testCtx(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
		err = w.Close(ctx)
		if len(in.Fired()) != 1 {
			t.Fatalf("the PUT was not stalled: %v", in.Counts())
		}
		if !e.exists(t, name) {
			t.Skipf("the PUT did not reach the server; nothing to check (Close: %v)", err)
		}
		if err != nil && strings.Contains(err.Error(), "lost") {
			t.Fatalf("the segment is stored, and Close says it is lost: %v", err)
		}
	})
}

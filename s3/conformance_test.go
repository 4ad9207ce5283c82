package s3_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/sink"
	"github.com/dlqdump/dlqdump/sinktest"
)

// A Writer and a Reader on one prefix pass the sink conformance suite, on
// gofakes3 and on versitygw. The Writer's Commit only spools a segment and
// the upload follows; the suite expects a committed segment to be listed at
// once, so its Writer here flushes the spool after each Commit. Where the
// server ignores If-Match on DELETE (gofakes3), DeleteRecord is unconditional,
// as the Reader documents, and the suite is told so; elsewhere (versitygw) it
// must refuse a stale version.
func TestConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		unconditional := !deleteHonoursIfMatch(t, e)
		t.Logf("%s: DeleteObject honours If-Match: %v", e.srv.Name, !unconditional)
		n := 0 // the suite's tests run one after another
		sinktest.RunWithOptions(t, func(t *testing.T) sinktest.Store {
			n++
			prefix := fmt.Sprintf("%s%03d/", e.prefix, n)
			w := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: prefix, Retry: fastRetry}
			t.Cleanup(func() {
				if err := w.Close(context.Background()); err != nil {
					t.Errorf("Writer.Close: %v", err)
				}
			})
			return sinktest.Store{
				Writer: flushingWriter{w},
				Reader: &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: prefix, Retry: fastRetry},
			}
		}, sinktest.Options{DeleteRecordUnconditional: unconditional})
	})
}

// flushingWriter waits for the upload in Commit.
type flushingWriter struct{ w *s3.Writer }

func (f flushingWriter) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	sw, err := f.w.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return flushingSegment{sw, f.w}, nil
}

type flushingSegment struct {
	sink.SegmentWriter
	w *s3.Writer
}

func (f flushingSegment) Commit(ctx context.Context) error {
	if err := f.SegmentWriter.Commit(ctx); err != nil {
		return err
	}
	return f.w.Flush(ctx)
}

// deleteHonoursIfMatch reports whether the server refuses a DeleteObject
// whose If-Match names another ETag.
func deleteHonoursIfMatch(t *testing.T, e *env) bool {
	t.Helper()
	e.put(t, "probe-delete", []byte("probe"))
	k := e.prefix + "probe-delete"
	_, err := e.client.DeleteObject(testCtx(t, time.Minute), &awss3.DeleteObjectInput{Bucket: &e.bucket, Key: &k, IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)})
	switch there := e.exists(t, "probe-delete"); {
	case isPrecondition(err) && there:
		return true
	case err == nil && !there:
		return false
	default:
		t.Fatalf("DeleteObject with a wrong If-Match = %v, object still there: %v", err, there)
		return false
	}
}

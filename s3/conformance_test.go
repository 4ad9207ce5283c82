package s3_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/sinktest"
)

// A Writer and a Reader on one prefix pass the sink conformance suite, on
// gofakes3 and on versitygw. The Writer's Commit only spools a segment and
// the upload follows; the suite expects a committed segment to be listed at
// once, so its Writer here flushes the spool after each Commit.
func TestConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		n := 0
		sinktest.RunWithOptions(t, func(t *testing.T) sinktest.Store {
			n++
			prefix := e.prefix + time.Now().Format("150405.000000") + "/"
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
		}, sinktest.Options{Lease: time.Second})
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

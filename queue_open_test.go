package dlqdump_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/sink"
)

// startedWriter is a Writer whose Recover starts background work (as an
// s3.Writer's uploader) and then fails; Close stops it.
type startedWriter struct {
	running atomic.Bool
	closes  atomic.Int32
}

func (w *startedWriter) Create(context.Context, string) (sink.SegmentWriter, error) {
	return nil, errors.New("startedWriter: Create not expected")
}

func (w *startedWriter) Recover(context.Context) ([]string, error) {
	w.running.Store(true)
	return nil, errors.New("spool directory unreadable")
}

func (w *startedWriter) Close(ctx context.Context) error {
	w.closes.Add(1)
	w.running.Store(false)
	return nil
}

// Issue 11 follow-up: when Recover failed after the Writer had started its
// work (an s3.Writer's uploader), NewQueue returned the error and nothing
// stopped the Writer: the Queue owns it, so NewQueue closes it.
func TestNewQueueClosesWriterWhenRecoverFails(t *testing.T) {
	w := &startedWriter{}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: dlqdump.Megabyte})
	if err == nil {
		q.Close()
		t.Fatal("NewQueue succeeded with a failing Recover")
	}
	if !errors.Is(err, dlqdump.ErrSink) {
		t.Errorf("NewQueue error %v does not wrap ErrSink", err)
	}
	if n := w.closes.Load(); n != 1 || w.running.Load() {
		t.Fatalf("after NewQueue failed: Writer closed %d times, still running %v; want closed once", n, w.running.Load())
	}
}

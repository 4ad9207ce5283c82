package dlqdump_test

import (
	"context"
	"io"
	"sync"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/sink"
)

// hookWriter wraps a Writer and calls hook before every operation of the
// Writer and of its segments: op is "create", "write", "sync", "truncate",
// "commit", "abort" or "close", and n counts the calls of op from 1. An error
// from hook fails the call without effect; hook may block. Recover is passed
// through, so the Queue treats the wrapped Writer as the one it wraps. after,
// when set, is called when a call of the segment's returns, with its error.
type hookWriter struct {
	dlqdump.Writer
	hook  func(op string, n int) error
	after func(op string, err error)

	mu    sync.Mutex
	calls map[string]int
}

func (w *hookWriter) before(op string) error {
	w.mu.Lock()
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	w.calls[op]++
	n := w.calls[op]
	w.mu.Unlock()
	if w.hook == nil {
		return nil
	}
	return w.hook(op, n)
}

func (w *hookWriter) done(op string, err error) error {
	if w.after != nil {
		w.after(op, err)
	}
	return err
}

func (w *hookWriter) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	if err := w.before("create"); err != nil {
		return nil, err
	}
	sw, err := w.Writer.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &hookSegment{sw: sw, w: w}, nil
}

func (w *hookWriter) Recover(ctx context.Context) ([]string, error) {
	if rc, ok := w.Writer.(sink.Recoverer); ok {
		return rc.Recover(ctx)
	}
	return nil, nil
}

type hookSegment struct {
	sw sink.SegmentWriter
	w  *hookWriter
}

func (s *hookSegment) Write(p []byte) (int, error) {
	if err := s.w.before("write"); err != nil {
		return 0, s.w.done("write", err)
	}
	n, err := s.sw.Write(p)
	return n, s.w.done("write", err)
}

func (s *hookSegment) Sync() error {
	if err := s.w.before("sync"); err != nil {
		return s.w.done("sync", err)
	}
	return s.w.done("sync", s.sw.Sync())
}

func (s *hookSegment) Truncate(size int64) error {
	if err := s.w.before("truncate"); err != nil {
		return s.w.done("truncate", err)
	}
	return s.w.done("truncate", s.sw.Truncate(size))
}

func (s *hookSegment) Commit(ctx context.Context) error {
	if err := s.w.before("commit"); err != nil {
		return s.w.done("commit", err)
	}
	return s.w.done("commit", s.sw.Commit(ctx))
}

func (s *hookSegment) Abort() error {
	if err := s.w.before("abort"); err != nil {
		return s.w.done("abort", err)
	}
	return s.w.done("abort", s.sw.Abort())
}

func (s *hookSegment) Close() error {
	if err := s.w.before("close"); err != nil {
		return s.w.done("close", err)
	}
	if c, ok := s.sw.(io.Closer); ok {
		return s.w.done("close", c.Close())
	}
	return s.w.done("close", nil)
}

// dumpEvents is a MetricsWriter that reports every accepted record on a
// channel: Enqueue calls Dump once the record is in the Queue.
type dumpEvents struct {
	dlqdump.NopMetrics
	dumped chan int
}

func newDumpEvents() *dumpEvents { return &dumpEvents{dumped: make(chan int, 1024)} }

func (m *dumpEvents) Dump(size int) { m.dumped <- size }

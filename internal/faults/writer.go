package faults

import (
	"context"
	"io"
	"sync"

	"github.com/dlqdump/dlqdump/sink"
)

//go:generate go run gen_compose.go

// The operations of a wrapped sink.Writer and of the SegmentWriters it
// creates.
const (
	OpCreate      Op = "Writer.Create"
	OpRecover     Op = "Writer.Recover"
	OpFlush       Op = "Writer.Flush"
	OpWriterClose Op = "Writer.Close"
	OpWrite       Op = "Segment.Write"
	OpSync        Op = "Segment.Sync"
	OpTruncate    Op = "Segment.Truncate"
	OpCommit      Op = "Segment.Commit"
	OpAbort       Op = "Segment.Abort"
	OpClose       Op = "Segment.Close"
)

// WrapWriter returns w with every call counted by in and failed where in's
// plan says: Create, the optional Recover, Flush and Close, and every method
// of the SegmentWriters Create returns. The result implements the optional
// interfaces w implements (sink.Recoverer, sink.Backlogger or
// sink.BacklogWatcher, sink.Flusher, sink.Closer, sink.DurabilityChecker;
// io.Closer for a SegmentWriter), and only those. Backlog, WatchBacklog and
// CheckDurable are passed through uncounted: they report, they do not act.
//
// To forward a new optional interface, add a forwarder type below and a line
// to gen_compose.go, and run go generate.
func WrapWriter(w sink.Writer, in *Injector) sink.Writer {
	return composeWriter(&writer{inner: w, in: in})
}

// writer is the core of a wrapped Writer; the optional interfaces are added
// by composeWriter.
type writer struct {
	inner sink.Writer
	in    *Injector

	mu   sync.Mutex
	live map[*segmentWriter]bool // created, not yet committed, aborted or closed
}

// ReleaseSegments closes (io.Closer) the segments created through w, a
// wrapper WrapWriter returned, that were neither committed, aborted nor
// closed: what the end of the process does to the files a dropped segment
// held open. A test calls it before it restarts on the same store in the
// same process. It returns how many it released.
func ReleaseSegments(w sink.Writer) int {
	x, ok := w.(interface{ core() *writer })
	if !ok {
		return 0
	}
	c := x.core()
	c.mu.Lock()
	live := c.live
	c.live = nil
	c.mu.Unlock()
	for s := range live {
		if cl, ok := s.inner.(io.Closer); ok {
			_ = cl.Close()
		}
	}
	return len(live)
}

func (w *writer) core() *writer { return w }

// track records whether a segment is still live.
func (w *writer) track(s *segmentWriter, live bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if live {
		if w.live == nil {
			w.live = map[*segmentWriter]bool{}
		}
		w.live[s] = true
	} else {
		delete(w.live, s)
	}
}

// Create creates the segment through the inner Writer. A Lost fault releases
// the created segment without committing or aborting it (io.Closer), as a
// process that lost the handle would.
func (w *writer) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	sw, err := Call(ctx, w.in, OpCreate, func() (sink.SegmentWriter, error) {
		return w.inner.Create(ctx, name)
	}, func(sw sink.SegmentWriter) {
		if c, ok := sw.(io.Closer); ok {
			_ = c.Close()
		}
	})
	if err != nil {
		return nil, err
	}
	seg := &segmentWriter{inner: sw, in: w.in, w: w}
	w.track(seg, true)
	return composeSegment(seg), nil
}

type recoverer struct{ w *writer }

func (r recoverer) Recover(ctx context.Context) ([]string, error) {
	return Call(ctx, r.w.in, OpRecover, func() ([]string, error) {
		return r.w.inner.(sink.Recoverer).Recover(ctx)
	}, nil)
}

type backlogger struct{ w *writer }

func (b backlogger) Backlog() int64 { return b.w.inner.(sink.Backlogger).Backlog() }

type backlogWatcher struct{ w *writer }

func (b backlogWatcher) Backlog() int64 { return b.w.inner.(sink.BacklogWatcher).Backlog() }

func (b backlogWatcher) WatchBacklog() sink.Backlog {
	return b.w.inner.(sink.BacklogWatcher).WatchBacklog()
}

type flusher struct{ w *writer }

func (f flusher) Flush(ctx context.Context) error {
	return f.w.in.Do(ctx, OpFlush, func() error { return f.w.inner.(sink.Flusher).Flush(ctx) })
}

type closer struct{ w *writer }

// Close closes the inner Writer. It fails (Fail) as sink.Closer's Close
// does when its deadline has passed at once: the inner Close runs with a
// context already done, so the Writer gives up, releases itself and keeps
// what it still holds only if it can (a SpoolDir); then the failure is
// reported.
func (c closer) Close(ctx context.Context) error {
	inner := c.w.inner.(sink.Closer)
	_, err := CallFailing(ctx, c.w.in, OpWriterClose, func() (struct{}, error) { return struct{}{}, inner.Close(ctx) }, nil, func() {
		done, cancel := context.WithCancel(context.WithoutCancel(ctx))
		cancel()
		_ = inner.Close(done)
	})
	return err
}

type durabilityChecker struct{ w *writer }

func (d durabilityChecker) CheckDurable() error {
	return d.w.inner.(sink.DurabilityChecker).CheckDurable()
}

// segmentWriter is the core of a wrapped SegmentWriter.
type segmentWriter struct {
	inner sink.SegmentWriter
	in    *Injector
	w     *writer // tracks it; nil for a Reader's segments
}

// done records that the segment was finished, if err is nil.
func (s *segmentWriter) done(err error) error {
	if err == nil && s.w != nil {
		s.w.track(s, false)
	}
	return err
}

// Write writes p. A Lost fault writes all of p and reports 0 bytes written.
func (s *segmentWriter) Write(p []byte) (int, error) {
	return Call(nil, s.in, OpWrite, func() (int, error) { return s.inner.Write(p) }, nil)
}

func (s *segmentWriter) Sync() error {
	return s.in.Do(nil, OpSync, s.inner.Sync)
}

func (s *segmentWriter) Truncate(size int64) error {
	return s.in.Do(nil, OpTruncate, func() error { return s.inner.Truncate(size) })
}

func (s *segmentWriter) Commit(ctx context.Context) error {
	return s.done(s.in.Do(ctx, OpCommit, func() error { return s.inner.Commit(ctx) }))
}

func (s *segmentWriter) Abort() error {
	return s.done(s.in.Do(nil, OpAbort, s.inner.Abort))
}

type segmentCloser struct{ s *segmentWriter }

func (c segmentCloser) Close() error {
	return c.s.done(c.s.in.Do(nil, OpClose, c.s.inner.(io.Closer).Close))
}

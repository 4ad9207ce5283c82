package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// NewQueue validates the config and starts a Queue. If the Writer implements
// sink.Recoverer, segments left open by a crash are sealed and published
// first.
//
// The Queue owns the Writer from here on: if NewQueue fails after it called
// Recover (Recover failed), it closes the Writer (sink.Closer) without
// waiting for uploads, so that nothing it started runs on; what an s3.Writer
// holds in its SpoolDir stays there for the next start. Such a Writer must
// not be used again: give the next NewQueue a new one.
func NewQueue(config *Config) (*Queue, error) {
	c, err := config.queueConfig()
	if err != nil {
		return nil, err
	}
	comps := make([]*segment.Compressor, c.Compressors)
	for i := range comps {
		if comps[i], err = segment.NewCompressor(c.codec, c.CompressionLevel); err != nil {
			return nil, fmt.Errorf("%w: CompressionLevel: %w", ErrConfig, err)
		}
	}
	q := &Queue{
		c:         c,
		mw:        c.MetricsWriter,
		log:       c.Logger.With(slog.String("component", "dlqdump.Queue")),
		space:     make(chan struct{}),
		workReady: make(chan struct{}, c.Compressors),
		ready:     make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	q.backlog, _ = c.Writer.(sink.Backlogger)
	q.watcher, _ = c.Writer.(sink.BacklogWatcher)
	q.flusher, _ = c.Writer.(sink.Flusher)
	q.closer, _ = c.Writer.(sink.Closer)
	if err := recoverSink(context.Background(), c.Writer, q.log, q.mw); err != nil {
		return nil, q.closeFailedStart(err)
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.cur = q.newBlockLocked()
	for _, comp := range comps {
		q.wg.Add(1)
		go q.compressLoop(comp)
	}
	go q.writeLoop()
	return q, nil
}

// closeFailedStart closes the Writer of a Queue that failed to start, at
// once (an already cancelled context: uploads are not waited for), and
// returns cause with what Close said.
func (q *Queue) closeFailedStart(cause error) error {
	if q.closer == nil {
		return cause
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := callBounded(ctx, q.closer.Close); err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w; the Writer was closed: %w", cause, err)
	}
	return cause
}

// recoverSink seals and publishes the segments a crash left open in s, when
// it can (sink.Recoverer), logging and counting each.
func recoverSink(ctx context.Context, s any, log *slog.Logger, mw MetricsWriter) error {
	rc, ok := s.(sink.Recoverer)
	if !ok {
		return nil
	}
	names, err := rc.Recover(ctx)
	for _, name := range names {
		log.Info("recovered a segment left open by a crash", slog.String("segment", name))
		mw.Flush(FlushRecover, 0, 0, 0)
	}
	if errors.Is(err, ErrConfig) {
		return err // the sink is misconfigured (it names the field), not failing
	}
	if err != nil {
		mw.Fail("recover")
		return fmt.Errorf("%w: recover unfinished segments: %w", ErrSink, err)
	}
	return nil
}

package dlqdump

// Size returns the bytes accepted but not yet written, plus the Writer's
// backlog (see sink.Backlogger). It implements queue.Interface.
func (q *Queue) Size() int {
	n, _ := q.used()
	return int(n)
}

// Capacity returns Config.MaxPending. It implements queue.Interface.
func (q *Queue) Capacity() int { return int(q.c.MaxPending) }

// Rate returns Size over Capacity: how close Enqueue is to backpressure. It
// implements queue.Interface.
func (q *Queue) Rate() float32 { return float32(q.Size()) / float32(q.c.MaxPending) }

// QueueStats are a Queue's counters.
type QueueStats struct {
	// Records is the number of records accepted by Enqueue.
	Records uint64
	// Segments is the number of segments committed to the Writer.
	Segments uint64
	// Stored is how many of those are stored where readers find them: all
	// of them, unless the Writer stores committed segments later (an
	// s3.Writer's spool, see sink.BacklogWatcher) and has not yet.
	Stored uint64
	// Pending is the bytes accepted but not yet written.
	Pending int64
	// Backlog is the bytes of committed segments the Writer holds, not yet
	// stored.
	Backlog int64
	// LastError is the last sink error, nil after a successful write; or,
	// if there is none, the Writer's last failure to store a committed
	// segment.
	LastError error
	// Refused counts the Enqueue calls that stored nothing, by why.
	Refused Refusals
	// LastRefusal is the error of the last refused Enqueue (naming, for an
	// item the Encoder refused, its type), nil if none was.
	LastRefusal error
}

// Stats returns the Queue's counters.
func (q *Queue) Stats() QueueStats {
	s := QueueStats{Records: q.records.Load(), Segments: q.segments.Load(), Pending: q.pending.Load()}
	s.Stored = s.Segments
	switch {
	case q.watcher != nil:
		bl := q.watcher.WatchBacklog()
		s.Stored -= min(uint64(max(bl.Segments, 0)), s.Segments)
		s.Backlog = bl.Bytes
		s.LastError = bl.LastError
	case q.backlog != nil:
		s.Backlog = q.backlog.Backlog()
	}
	if e := q.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	s.Refused = q.refused.counts()
	if e := q.refused.last.Load(); e != nil {
		s.LastRefusal = *e
	}
	return s
}

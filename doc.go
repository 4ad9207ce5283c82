// Package dlqdump keeps the dead letters of in-process queues: what a queue
// (github.com/koykov/queue, or any code with an Enqueue(x any) error) cannot
// hold or process is dumped into compact, versioned, compressed, checksummed
// segments on local disk or S3, can be inspected offline, and is restored
// later at a rate the destination can take. Nothing that enters the dump is
// lost without a trace.
//
// # Dumping
//
// A Queue is the dumper. It implements the koykov queue.Interface, so it plugs
// into queue.Config.DLQ:
//
//	dump, err := dlqdump.NewQueue(&dlqdump.Config{
//		Version:  dlqdump.NewVersion(1, 0, 0, 0),
//		Capacity: 64 * dlqdump.Megabyte,          // largest segment
//		Encoder:  encoder.JSON{},                 // the items' own types
//		Writer:   &fs.Writer{Directory: "/var/lib/app/dlq"},
//	})
//	...
//	q, err := queue.New(&queue.Config{Capacity: 1000, Workers: 8, Worker: w, DLQ: dump, FailToDLQ: true})
//	...
//	defer dump.CloseAfter(q) // q's workers finish (failing into the dump), then the dump closes
//
// An Enqueue that stores nothing (after Close, an item the Encoder cannot
// encode, backpressure) is counted in Queue.Stats().Refused and the
// MetricsWriter, since koykov drops the error its DLQ returns.
//
// Queue.Enqueue encodes the item (Config.Encoder) and appends it to an
// in-memory block; it does no I/O. Blocks are compressed (zstd by default) by
// background goroutines and appended, in order, to the open segment, which is
// sealed and published atomically when it reaches Config.Capacity,
// Config.FlushInterval after its first record, on Queue.Flush and on Close.
// Items can carry headers (an Envelope, or a HeaderCarrier item): why they
// were dead-lettered, where from, the last error.
//
// # Closing
//
// Close the queues that feed the Queue first: Queue.CloseAfter closes a
// koykov queue, waits until its workers stopped, then closes the Queue.
//
// The Queue owns its Writer. Queue.Flush returns once the flushed segment is
// stored where readers find it, and Queue.Close once every segment is, also
// with a Writer that uploads in the background (s3.Writer): there is nothing
// else to close. Queue.Shutdown(ctx) bounds that wait, whatever the sink
// does: past the deadline (by 300ms at most) it stops and returns
// a *ShutdownError that counts every record accepted and not stored, once,
// by what became of it: not written (not in the dump; dumping it again
// stores it once), written but not synced (in the open segment, which the
// next NewQueue on the same sink publishes), held by the Writer for the next
// start, or in doubt (inside a sink call that had not returned). A Durable
// Enqueue still waiting gets its own record's fate: ErrNotWritten,
// ErrNotSynced or ErrInDoubt. Queue.Stats tells committed segments from
// stored ones.
//
// # What a crash can lose
//
// With Config.Durable, Enqueue returns only after the record is synced to
// stable storage; concurrent callers share each sync. Every record whose
// Enqueue returned nil survives kill -9 and power loss: the fs sink's Recover
// seals the segment left open on the next start. A failed sync is never
// retried in place: the segment is cut back to its last good sync and every
// block written since is written again. NewQueue refuses Durable with a
// Writer that cannot sync (an s3.Writer without SpoolDir).
//
// Without Durable (the default), Enqueue returns as soon as the record is in
// memory. Then:
//
//   - If the process dies (kill -9, panic, OOM), the records not yet handed to
//     the operating system are lost: those in the block being filled and in
//     blocks waiting to be compressed or written. That is at most
//     Config.MaxPending bytes; at low traffic, when the block being filled
//     fills slowly, it is the records that entered since the last block was
//     cut, at most Config.FlushInterval's worth. Blocks already written to the
//     open segment's file survive and are recovered on the next start.
//   - If the machine loses power, the records of the open segment (not yet
//     synced) are lost too: at most Config.Capacity bytes, at most
//     Config.FlushInterval's worth of records.
//
// Queue.Stats and Config.MetricsWriter count what was accepted, so a loss is
// never silent: the difference shows.
//
// # Backpressure
//
// The bytes accepted but not yet written are bounded by Config.MaxPending.
// Queue.Rate reports them over the limit. Past it Enqueue waits up to
// Config.EnqueueTimeout and then returns ErrBackpressure: the caller learns
// that the item was not dumped. A failing sink (a full disk, S3 down) is
// retried with backoff; the data stays in memory meanwhile and backpressure
// tells the callers.
//
// # Restoring
//
// A Restorer reads segments back from a Reader, checks each segment's data
// Version, decodes every record (Config.Decoder) and enqueues it into
// Config.Queue at a rate it can take.
//
// Restorers share a store through one claim protocol, written once above the
// sinks: each ready segment has a small record (sink.Records) that holds its
// claim and its progress and changes only by compare-and-swap. A claim is
// told apart by a random token, never by Config.Owner, which is a label for
// people, so replicas of one service may share a name. A claim expires
// without any clock being compared across machines: another restorer takes
// it over only after seeing the record unchanged for the holder's lease by
// its own monotonic clock, while the holder, renewing every third of the
// lease, stops trusting its claim a fifth of a lease earlier than that.
//
// The progress describes all the work done on a segment: the position of the
// next record, the records delivered, and the records set aside (undecodable,
// refused, replayed too often, or not selected by a filtered pass) that are
// still only in the segment. Records set aside are copied into side segments
// (quarantine, or a ready "remainder") only when the segment is finished or
// the progress would grow too large, under names derived from the segment and
// the records they hold, so an interrupted run finds them already written.
// A pass stopped by its context or by Close saves the progress at the record
// it was about to deliver; a crash repeats at most the block in progress.
//
// # Segments
//
// The segment package defines the one on-disk format used by every sink, the
// Restorer and the CLI: a header, blocks of records each with a CRC32C, and a
// footer indexing the blocks. See its documentation.
package dlqdump

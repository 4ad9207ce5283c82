// Package faults enumerates faults instead of sampling them. An Injector
// counts the calls of every operation it sees and makes one chosen call fail:
// the K-th call of an operation (a Point), in one of a few modes — it fails
// without effect, it takes effect and then reports failure (the answer was
// lost), it hangs, or the process dies just before or just after it.
//
// The Injector knows nothing of what it wraps. Thin wrappers put it in front
// of an interface: WrapWriter for a sink.Writer and the SegmentWriters it
// creates (with every optional interface the wrapped Writer implements, and
// only those), WrapReader for the restore side's sink.Reader (its listings,
// reads, creates, moves, deletes and compare-and-swap records), HTTPClient
// for the requests an S3 client sends. A wrapper for another interface is a
// type whose methods pass each call through Do or Call under an Op name of
// its own; one Injector may count several wrappers at once (a Writer and its
// S3 client's requests, say), and a plan may hold several points.
//
// A test runs a fixed scenario once without a fault to count the calls of
// each operation (Injector.Counts), then once more for each Point that All or
// Sample derives from those counts, and checks its invariants after each run.
// Package dumpfaults holds the dump side's scenarios and invariants.
package faults

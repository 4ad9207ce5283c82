// Package sink is what a storage backend implements for dlqdump: a place that
// stores the bytes of segments and a few small records, through primitives
// that are safe to retry. Users pick a sink (fs, s3) and never call these
// interfaces themselves; the protocols built on them (publishing, claims,
// leases, checkpoints) are written once in dlqdump.
//
// Every primitive may fail in two ways: without effect, or after taking effect
// with the answer lost. So each is either idempotent or guarded by a
// condition (create-if-absent, compare-and-swap), and a retry after an unseen
// success is harmless. The conformance suite in package sinktest checks this
// for every sink.
//
// On the dump side a Writer belongs to one dlqdump.Queue, which owns its
// lifecycle through optional interfaces: Recoverer (publish what a crash left
// open), DurabilityChecker (refuse Durable when Sync cannot work), Flusher and
// Closer (wait until committed segments are stored, for a sink that stores
// them in the background), Backlogger and BacklogWatcher (what is committed
// and not yet stored, and when that changes). A Writer that stores committed
// segments later must implement Closer, so that Queue.Close means stored
// where readers find it. A wrapper around a Writer (a fault injector, a
// metrics layer) must forward exactly the optional interfaces of what it
// wraps: the Queue asks for each with a type assertion.
package sink

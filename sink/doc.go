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
package sink

// Package dumpfaults enumerates the faults of the dump side: for each fixed
// Scenario (a dump of a few dozen records through a dlqdump.Queue, buffered
// or Durable, into a directory or an S3 bucket with a memory or a directory
// spool) it runs the dump once without a fault to count the calls of every
// sink operation and S3 request, then once more for each fault point (the
// K-th call of an operation failing without effect, taking effect and
// reporting failure, hanging, or killing the process just before or after
// it), restarts on the same store, and checks the invariants of Check.
//
// The tests (faults_dump_test.go in the module root) run a deterministic
// sample of the points; cmd/dlqdump-reliability runs them all and writes the
// counts into docs/RELIABILITY.md. Both call Harness.Explore.
package dumpfaults

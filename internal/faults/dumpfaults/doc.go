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
// sample of the points (CI); cmd/dlqdump-reliability runs them all (Every)
// and writes the counts into docs/RELIABILITY.md. Both call Harness.Explore.
// One point is reproduced with
//
//	DLQDUMP_FAULTS='fs/durable@Segment.Sync#3/lost' go test -run TestFaultsDump -v .
//
// Fail and Lost points run in process. Crash, CrashAfter, Stall and StallAfter points
// run the dump in a child process (Harness.Child, which calls ChildMain): it
// is killed at the point, or, for the stalls, shuts the Queue down once the call
// hangs and exits right after Shutdown returns, as a program would. Every run
// then opens a Queue on the same store without faults (which recovers what
// the run left) and checks the store against what the Queue answered.
//
// Runs wait for events, not for time. Only hangs are bounded by the clock
// (hangAfter, runCap, childCap), far above what a working run takes.
package dumpfaults

// Package restorefaults enumerates the faults of the restore side. A fixed
// scenario (three segments of a few hundred records in a directory: one with
// an undecodable record and one the destination always refuses, restored by
// a pass filtered on a header, which leaves a remainder, and then by a full
// pass, with archiving on) runs once without a fault to count the calls of
// every sink.Reader operation (faults.WrapReader), then once more for each
// fault point: the K-th call of an operation failing without effect, taking
// effect and reporting failure (in process), or killing the process just
// before or after it (in a child process, Harness.Child, which calls
// ChildMain); and once for each block boundary with the pass's context
// cancelled there. After each run, restorers without faults finish the
// work, and Check tests the invariants:
//
//   - every record is delivered, or in quarantine if it cannot be delivered
//     (and those are in quarantine exactly once, and never delivered);
//   - at most one block of each segment in flight is delivered twice per
//     interruption (the segments deliver at once, each checkpointing its
//     own blocks), none after a cancellation;
//   - nothing is left: no ready segment, no temporary file, no claim
//     record; every original segment is in the archive;
//   - the metrics and Stats of the restorers equal what the destination
//     received and the quarantine holds.
//
// The root package's tests run a deterministic sample (CI);
// cmd/dlqdump-reliability runs every point. One point is reproduced with
//
//	DLQDUMP_RESTORE_FAULTS='Reader.WriteRecord#3/lost' go test -run TestFaultsRestore -v .
package restorefaults

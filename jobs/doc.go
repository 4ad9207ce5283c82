// Package jobs keeps restore jobs: one-off restores, scheduled to the
// second, that outlive processes. A job is a small record in the store of
// the dump it restores (a table beside the segments, sink.Tables), changed
// only by compare-and-swap, so any process can create, list, show, pause,
// resume or cancel one (Store), and any number of runners (Runner: a
// library's Restorers, or `dlqdump job run`) run the due ones, each job
// once: a runner claims a job as a restorer claims a segment, with a lease
// another runner takes over once it stops being renewed, and records the
// job's progress at least every RunnerOptions.ProgressInterval and before
// every checkpoint of its segments, so a job whose runner died is taken
// over from there. A pause or cancel takes effect at the job's next record,
// within about a second at any rate; however a job's run ends, its next
// state is decided once, from what it did and the request stored then, in
// the write that ends it, so no request is ever lost (exec_end.go).
//
// A job selects records as a dlqdump.RunOptions does (time range, header
// values, segments, a limit) from the ready area or the quarantine, delivers
// them into a destination by name at a velocity of its own, and runs at a
// given second, or inside daily windows. A selective job reads the blocks
// it selects from and rewrites nothing: the records it leaves stay in their
// segments (see dlqdump's Report.LeftSegments). A job with a selection and a
// Rate carves (dlqdump.RunOptions.Carve): it holds a segment it shares only
// while it copies its records out of it into a side segment of their own,
// then delivers from that at its pace, so jobs whose selections are
// disjoint deliver from one segment at the same time, and overlapping ones
// deliver each record once; it costs a copy of the records it selects. A
// pass that meets a segment another job holds (one carving, or a job
// without a Rate delivering from it) restores its other segments, then
// waits for that one (RunnerOptions.WaitHeld) and reads what the other job
// left in it, instead of ending and being tried again.
package jobs

package jobs

// How runners share the due jobs without talking to each other: each ranks
// itself for every job among the runners whose heartbeats it heard.

import (
	"context"
	"hash/fnv"
	"log/slog"
	"time"
)

// handOffStep is how long after one runner's turn at a due job the next
// runner's comes, at most (see Runner.rank).
const handOffStep = 100 * time.Millisecond

// handOffStep returns the runner's: handOffStep, or a quarter of its
// PollInterval if shorter.
func (rn *Runner) handOffStep() time.Duration { return min(handOffStep, rn.o.PollInterval/4) }

// rank returns this runner's rank for a job among the runners heard from
// lately: they rank themselves for each job by a hash of their owner label
// and the job's ID (rendezvous hashing), and the runner of rank r looks at
// a due job r hand-off steps after it is due, so that the first in rank
// takes it alone and the others look at it only once it is late (its
// runner busy, dead or not serving its destination). Without peers, 0.
func (rn *Runner) rank(id string) int {
	rn.mu.Lock()
	peers := rn.peers
	rn.mu.Unlock()
	mine := rendezvous(rn.o.Owner, id)
	rank := 0
	for _, p := range peers {
		if h := rendezvous(p, id); h > mine || h == mine && p > rn.o.Owner {
			rank++
		}
	}
	return rank
}

// rendezvous is the weight of a runner for a job: FNV-1a of both, mixed by
// SplitMix64's finaliser (FNV alone barely tells owners apart that differ in
// a byte).
func rendezvous(owner, id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(owner))
	h.Write([]byte{0})
	h.Write([]byte(id))
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// hearPeers reads which runners were heard from lately, for rank; a
// heartbeat that cannot be read is left out, and those of runners silent
// for forgetRunnersAfter are removed, so that runners that died without
// Close are not read for ever. A listing that fails leaves the last view.
func (rn *Runner) hearPeers(ctx context.Context) {
	now := time.Now()
	var peers []string
	read := false
	for ri, err := range rn.store.Runners(ctx) {
		if err != nil {
			if ctx.Err() == nil {
				rn.log.Debug("reading a runner's heartbeat failed", slog.Any("error", err))
			}
			continue
		}
		read = true
		switch {
		case ri.Owner == rn.o.Owner:
		case ri.Live(now):
			peers = append(peers, ri.Owner)
		case now.Sub(ri.Seen) > forgetRunnersAfter:
			if err := rn.store.dropSilentRunner(ctx, ri.Owner, now.Add(-forgetRunnersAfter)); err != nil && ctx.Err() == nil {
				rn.log.Debug("removing the heartbeat of a runner long silent failed", slog.String("runner", ri.Owner), slog.Any("error", err))
			}
		}
	}
	if !read {
		return // a listing that failed, or nothing written yet
	}
	rn.mu.Lock()
	rn.peers = peers
	rn.mu.Unlock()
}

// forgetRunnersAfter is how long a runner's heartbeat stays once it stopped
// beating (a runner that died without Close).
const forgetRunnersAfter = time.Hour

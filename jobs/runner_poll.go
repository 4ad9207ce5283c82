package jobs

// How a runner finds the due jobs: one listing of the due markers a
// PollInterval, the jobs started from it at their turns.

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// poll starts the due jobs it can, from the last listing of the due
// markers, listed again if fresh, once a PollInterval, or once a listing cut
// short at maxCandidates has been taken; every tenth of the horizon, it
// first moves the markers that came within it into "jobsdue".
func (rn *Runner) poll(ctx context.Context, fresh bool) (next time.Time, err error) {
	now := time.Now()
	rn.mu.Lock()
	promote := now.Sub(rn.moved) >= horizon/promoteEvery
	rn.mu.Unlock()
	if promote {
		// What cannot be moved (a damaged marker, a store error) is
		// tried again next time; the due jobs run meanwhile.
		n, err := rn.store.promote(ctx, now.Add(horizon))
		if err != nil && ctx.Err() == nil {
			rn.log.Warn("moving the jobs due within the hour failed; tried again in a while", slog.Any("error", err))
		}
		rn.mu.Lock()
		rn.moved = now
		rn.mu.Unlock()
		if n > 0 {
			rn.log.Debug("jobs now due within the hour", slog.Int("jobs", n))
		}
	}
	if len(rn.free) == 0 {
		return now.Add(rn.o.PollInterval), nil // woken when a Restorer frees
	}
	rn.pollMu.Lock()
	defer rn.pollMu.Unlock()
	if fresh || now.Sub(rn.listed) >= rn.relistEvery(now) || rn.partial && !rn.anyDue(now) {
		if err := rn.list(ctx, now); err != nil {
			return next, err
		}
	}
	// The due jobs whose turn came are run in the order of their rank,
	// then of their due time: each runner first takes those it ranks
	// first for, so that runners behind a backlog take different jobs
	// rather than look at the same ones. Those a busy runner cannot take
	// stay for its next poll; the others go (a listing brings them back
	// if they are still due).
	var due, later []candidate
	for _, c := range rn.listing {
		if c.turn.After(now) {
			later = append(later, c)
			if next.IsZero() || c.turn.Before(next) {
				next = c.turn
			}
			continue
		}
		if !rn.busy(c.id, c.key, now) {
			due = append(due, c)
		}
	}
	slices.SortStableFunc(due, func(a, b candidate) int { return a.rank - b.rank })
	for i, c := range due {
		if len(rn.free) == 0 {
			later = append(later, due[i:]...)
			next = now.Add(rn.o.PollInterval) // woken when a Restorer frees
			break
		}
		if err := rn.consider(ctx, c.key, c.at, c.id); err != nil && ctx.Err() == nil {
			rn.log.Warn("a due job could not be started", slog.String("job", c.id), slog.Any("error", err))
		}
	}
	rn.listing = later
	if relist := rn.listed.Add(rn.relistEvery(now)); next.IsZero() || next.After(relist) {
		next = relist // the next listing: a job due past this one's reach is found then
	}
	return next, nil
}

// list reads the due markers from the first to those due a PollInterval
// from now, at most maxCandidates of them, into rn.listing: the polls until
// the next listing take their jobs from there, so that a runner lists the
// markers once a PollInterval rather than at every job's turn (a listing
// of a large "jobsdue" is the costliest request a versitygw serves). A job
// created meanwhile is seen by the next listing, as it was by the next poll.
func (rn *Runner) list(ctx context.Context, now time.Time) error {
	if st, ok := rn.store.due.(sink.Stamper); ok {
		// Read before the listing: a change after it shows.
		stamp, err := st.Stamp(ctx)
		rn.mu.Lock()
		rn.stamp = stamp
		if err != nil {
			rn.stamp = ""
		}
		rn.mu.Unlock()
	}
	rn.listing, rn.partial = rn.listing[:0], false
	until := now.Add(rn.o.PollInterval)
	for key, err := range rn.store.due.RecordNames(ctx) {
		if err != nil {
			return err
		}
		at, id, ok := parseDueKey(key)
		if !ok {
			continue
		}
		if at.After(until) {
			break
		}
		if rn.busy(id, key, now) {
			continue // not counted: jobs this runner cannot take must not hide those behind them
		}
		rank := rn.rank(id)
		rn.listing = append(rn.listing, candidate{key: key, at: at, id: id, rank: rank,
			turn: at.Add(time.Duration(rank) * rn.handOffStep())})
		if len(rn.listing) == maxCandidates {
			rn.partial = true // more may be due: listed again once these are taken
			break
		}
	}
	rn.listed = now
	rn.mu.Lock()
	rn.listTook = time.Since(now)
	rn.mu.Unlock()
	return nil
}

// relistEvery returns how long after a listing the next one is due: a
// PollInterval, or, while a listing cut at maxCandidates still holds due
// jobs (a runner behind a backlog), backlogRelists of them. Such a runner
// has no Restorer free for the jobs a listing would add (it takes the due
// ones it holds first), and a listing of a few hundred keys costs it and an
// S3 server tens of times what a job's look does (on a versitygw, some
// 40 µs and 20 µs of CPU per key); it lists again as soon as those are
// taken (poll). A job it held off from whose runner stopped is found that
// much later behind a backlog (seed 002: 0.18-0.21 listings per job where
// 0.25-0.31).
func (rn *Runner) relistEvery(now time.Time) time.Duration {
	if rn.partial && rn.anyDue(now) {
		return backlogRelists * rn.o.PollInterval
	}
	return rn.o.PollInterval
}

// backlogRelists is how many PollIntervals a runner behind a backlog keeps
// its listing (relistEvery).
const backlogRelists = 4

// changed reports whether an idle runner should list the due markers now:
// it has a free Restorer and nothing left to start from its last listing,
// the markers changed since that listing (their stamp), and it is older
// than fifty times what it took (so that a large "jobsdue" changing all the
// time costs 2% of a core in listings at most). A runner with jobs to start
// from its listing (jobs due every few milliseconds, say) lists again at
// its PollInterval, as it would.
func (rn *Runner) changed(ctx context.Context, st sink.Stamper) bool {
	if len(rn.free) == 0 {
		return false
	}
	rn.pollMu.Lock()
	listed, waiting := rn.listed, len(rn.listing)
	rn.pollMu.Unlock()
	if waiting > 0 {
		return false
	}
	rn.mu.Lock()
	last, took := rn.stamp, rn.listTook
	rn.mu.Unlock()
	if time.Since(listed) < max(noticeEvery, 50*took) {
		return false
	}
	stamp, err := st.Stamp(ctx)
	return err == nil && (stamp != last || last == "")
}

// busy reports whether job id, found by its marker key, is one this runner
// runs, or holds off from (run by another runner, or for a destination it
// does not serve, and due by the same marker since).
func (rn *Runner) busy(id, key string, now time.Time) bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	h, held := rn.held[id]
	return rn.running[id] != nil || held && h.key == key && now.Before(h.until)
}

// anyDue reports whether the listing holds a job whose turn came by now.
func (rn *Runner) anyDue(now time.Time) bool {
	for _, c := range rn.listing {
		if !c.turn.After(now) {
			return true
		}
	}
	return false
}

// candidate is a due marker a poll may start the job of.
type candidate struct {
	key, id string
	at      time.Time
	rank    int
	turn    time.Time // when this runner looks at it
}

// maxCandidates bounds the due jobs a poll looks at.
const maxCandidates = 256

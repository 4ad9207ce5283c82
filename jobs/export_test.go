package jobs

import (
	"context"
	"time"
)

// SetClock sets the clock the store writes by (its due markers' table).
func (s *Store) SetClock(now func() time.Time) { s.now = now }

// Markers returns the keys of the due markers in "jobsdue" and "jobslater".
func (s *Store) Markers(ctx context.Context) (due, later []string, err error) {
	for key, err := range s.due.RecordNames(ctx) {
		if err != nil {
			return nil, nil, err
		}
		due = append(due, key)
	}
	for key, err := range s.later.RecordNames(ctx) {
		if err != nil {
			return nil, nil, err
		}
		later = append(later, key)
	}
	return due, later, nil
}

// Promote moves the markers due until then into "jobsdue".
func (s *Store) Promote(ctx context.Context, until time.Time) (int, error) {
	return s.promote(ctx, until)
}

// Orphans counts the due markers the runner saw without a record.
func (rn *Runner) Orphans() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return len(rn.orphans)
}

// Rank returns the runner's rank for job id among the runners it heard.
func (rn *Runner) Rank(id string) int { return rn.rank(id) }

// Hear writes the runner's heartbeat and reads the others'.
func (rn *Runner) Hear(ctx context.Context) error {
	if err := rn.store.beat(ctx, rn.o.Owner, rn.dests, rn.o.Heartbeat); err != nil {
		return err
	}
	rn.hearPeers(ctx)
	return nil
}

// Beat writes a heartbeat for a runner of that owner serving dests.
func (s *Store) Beat(ctx context.Context, owner string, dests []string) error {
	return s.beat(ctx, owner, dests, time.Minute)
}

// PollInterval returns the runner's PollInterval.
func (rn *Runner) PollInterval() time.Duration { return rn.o.PollInterval }

// Listed reports whether the runner listed the due markers yet.
func (rn *Runner) Listed() bool {
	rn.pollMu.Lock()
	defer rn.pollMu.Unlock()
	return !rn.listed.IsZero()
}

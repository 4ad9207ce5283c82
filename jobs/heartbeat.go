package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// RunnerInfo is what a runner says of itself in the store, every
// RunnerOptions.Heartbeat.
type RunnerInfo struct {
	Owner string `json:"owner"`
	// Destinations are those its Restorers serve ("" for their Queue).
	Destinations []string `json:"destinations"`
	// Seen is when it last said so, by its own clock.
	Seen time.Time `json:"seen"`
	// Every is its heartbeat's interval.
	Every time.Duration `json:"every"`
}

// Live reports whether the runner was heard from lately, as of now: within
// three of its heartbeats (of a second at least).
func (ri *RunnerInfo) Live(now time.Time) bool {
	return now.Sub(ri.Seen) <= 3*max(ri.Every, time.Second)
}

// Serves reports whether the runner serves the destination.
func (ri *RunnerInfo) Serves(dest string) bool {
	for _, d := range ri.Destinations {
		if d == dest {
			return true
		}
	}
	return false
}

// runnerKey returns the key of a runner's heartbeat: its owner label, with
// what a key cannot hold replaced.
func runnerKey(owner string) string {
	b := []byte(owner)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 120 {
		b = b[:120]
	}
	return runnerKind + string(b)
}

// beat writes the runner's heartbeat.
func (s *Store) beat(ctx context.Context, owner string, dests []string, every time.Duration) error {
	data, err := json.Marshal(&RunnerInfo{Owner: owner, Destinations: dests, Seen: s.now().UTC(), Every: every})
	if err != nil {
		return err
	}
	key := runnerKey(owner)
	for range 3 {
		_, version, err := s.runners.ReadRecord(ctx, key)
		if err != nil && !errors.Is(err, sink.ErrNotFound) {
			return err
		}
		if _, err = s.runners.WriteRecord(ctx, key, data, version); !errors.Is(err, sink.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("dlqdump: the heartbeat of runner %s keeps changing", owner)
}

// dropRunner removes a runner's heartbeat.
func (s *Store) dropRunner(ctx context.Context, owner string) error {
	key := runnerKey(owner)
	_, version, err := s.runners.ReadRecord(ctx, key)
	if errors.Is(err, sink.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.runners.DeleteRecord(ctx, key, version); err != nil && !errors.Is(err, sink.ErrNotFound) && !errors.Is(err, sink.ErrConflict) {
		return err
	}
	return nil
}

// dropSilentRunner removes the heartbeat of runner owner if it was last
// written before before (by its clock).
func (s *Store) dropSilentRunner(ctx context.Context, owner string, before time.Time) error {
	key := runnerKey(owner)
	data, version, err := s.runners.ReadRecord(ctx, key)
	if errors.Is(err, sink.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var ri RunnerInfo
	if err := json.Unmarshal(data, &ri); err != nil || !ri.Seen.Before(before) {
		return nil
	}
	if err := s.runners.DeleteRecord(ctx, key, version); err != nil && !errors.Is(err, sink.ErrNotFound) && !errors.Is(err, sink.ErrConflict) {
		return err
	}
	return nil
}

// Runners returns what the runners said of themselves, the last time each
// did (a runner that stopped without Close stays listed, with an old Seen).
func (s *Store) Runners(ctx context.Context) iter.Seq2[RunnerInfo, error] {
	return func(yield func(RunnerInfo, error) bool) {
		for key, err := range s.runners.RecordNames(ctx) {
			if err != nil {
				yield(RunnerInfo{}, err)
				return
			}
			if !strings.HasPrefix(key, runnerKind) {
				continue
			}
			data, _, err := s.runners.ReadRecord(ctx, key)
			if errors.Is(err, sink.ErrNotFound) {
				continue
			}
			var ri RunnerInfo
			if err == nil {
				err = json.Unmarshal(data, &ri)
			}
			if !yield(ri, err) {
				return
			}
		}
	}
}

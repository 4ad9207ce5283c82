package dlqdump_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// Issue 19, defect 4: ready segments A, B and C, A held by a live restorer,
// MaxSegments 1. The segments due are the two oldest, A and B: A is left to
// its holder (counted as claimed, and still counting toward the limit), B
// expires, and C, the newest, is never removed in A's place. The dry run
// says exactly that, and the run right after does exactly that. (Before, the
// dry run listed A and B, claimed 0, and the run removed B and C.)
func TestPruneDryRunIsThePrune(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	all := seedAged(t, dir, sink.AreaReady, base, 3)
	rd := &fs.Reader{Directory: dir}
	c, err := claims.NewClaimer(rd, "live", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.Claim(t.Context(), all[0])
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	mw := &expiries{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: &dest{}, MetricsWriter: mw,
		Retention: dlqdump.Retention{Ready: dlqdump.Limits{MaxSegments: 1}}})
	dry, err := r.Prune(t.Context(), dlqdump.PruneOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	run, err := r.Prune(t.Context(), dlqdump.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{all[1]}
	if got := expiredNames(dry); !slices.Equal(got, want) || dry.Claimed != 1 {
		t.Errorf("dry run: expires %q, %d claimed; want %q, 1 claimed", got, dry.Claimed, want)
	}
	if got := expiredNames(run); !slices.Equal(got, want) || run.Claimed != 1 {
		t.Errorf("run: expired %q, %d claimed; want %q, 1 claimed", got, run.Claimed, want)
	}
	if got, left := names(t, dir, sink.AreaReady), []string{all[0], all[2]}; !slices.Equal(got, left) {
		t.Errorf("left %q, want %q (the claimed oldest and the newest)", got, left)
	}
	if len(mw.got) != 1 {
		t.Errorf("metrics %q, want one expiry", mw.got)
	}
}

// A pass of the dry run decides as Claim does: a side segment's record,
// pending while its parent is still ready, cannot be claimed, so it is
// counted as claimed by both.
func TestPruneDryRunPendingSide(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	all := seedAged(t, dir, sink.AreaReady, base, 2)
	rd := &fs.Reader{Directory: dir}
	c, err := claims.NewClaimer(rd, "x", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	// all[0] is a side segment of all[1], which is still ready.
	if err := c.Reserve(t.Context(), all[0], all[1]); err != nil {
		t.Fatal(err)
	}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: &dest{},
		Retention: dlqdump.Retention{Ready: dlqdump.Limits{MaxAge: time.Hour}}})
	now := base.Add(100 * time.Hour)
	dry, err := r.Prune(t.Context(), dlqdump.PruneOptions{DryRun: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	run, err := r.Prune(t.Context(), dlqdump.PruneOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(expiredNames(dry), expiredNames(run)) || dry.Claimed != run.Claimed || run.Claimed != 1 {
		t.Fatalf("dry run %q (%d claimed), run %q (%d claimed)", expiredNames(dry), dry.Claimed, expiredNames(run), run.Claimed)
	}
}

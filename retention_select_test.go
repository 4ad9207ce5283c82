package dlqdump_test

import (
	"slices"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// seedSources writes a segment into area for each entry of sources, its
// records' "source" headers (and payloads) in order, an hour apart from base.
func seedSources(t *testing.T, dir string, area sink.Area, base time.Time, sources ...[]string) []string {
	t.Helper()
	counts := make([]int, len(sources))
	for i, s := range sources {
		counts[i] = len(s)
	}
	return seedHourly(t, dir, area, base, counts, func(i, j int) (map[string]string, []byte) {
		return map[string]string{"source": sources[i][j]}, []byte(sources[i][j])
	})
}

func rep(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// prune --select: a segment goes only when the selection selects every
// record it holds; with limits, among those the limits make due.
func TestPruneSelect(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	loadtest := selection.Where(map[string]string{"source": "loadtest"})
	mixed := append(rep("loadtest", 5), rep("orders", 5)...)
	for _, tc := range []struct {
		name       string
		limits     dlqdump.Limits
		sel        *selection.Selection
		want       []int
		unselected int
	}{
		// Selection alone: every segment selected whole; the mixed one
		// is left and counted, the one with no such record is not.
		{"select alone", dlqdump.Limits{}, loadtest, []int{0, 3}, 1},
		// Due by age (the first three), removed if selected whole.
		{"age and select", dlqdump.Limits{MaxAge: 90 * time.Minute}, loadtest, []int{0}, 2},
		// A time selection decided by the footers alone.
		{"time", dlqdump.Limits{}, mustParse(t, "time < 2026-11-01T01:30:00Z"), []int{0, 1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			all := seedSources(t, dir, sink.AreaQuarantine, base, rep("loadtest", 10), mixed, rep("orders", 10), rep("loadtest", 3))
			mw := &expiries{}
			c := dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: &dest{}, MetricsWriter: mw}
			c.Retention.Quarantine = tc.limits
			r := newRestorer(t, c)
			var want []string
			for _, i := range tc.want {
				want = append(want, all[i])
			}
			opts := dlqdump.PruneOptions{Now: base.Add(4 * time.Hour), Select: tc.sel, Areas: []dlqdump.Area{dlqdump.AreaQuarantine}}
			dryOpts := opts
			dryOpts.DryRun = true
			dry, err := r.Prune(t.Context(), dryOpts)
			if err != nil {
				t.Fatal(err)
			}
			if got := expiredNames(dry); !slices.Equal(got, want) || dry.Unselected != tc.unselected {
				t.Fatalf("dry run expires %q (%d unselected), want %q (%d)", got, dry.Unselected, want, tc.unselected)
			}
			if got := names(t, dir, sink.AreaQuarantine); len(got) != 4 {
				t.Fatalf("the dry run removed segments: %q left", got)
			}
			got, err := r.Prune(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if g := expiredNames(got); !slices.Equal(g, want) || got.Unselected != tc.unselected {
				t.Fatalf("expired %q (%d unselected), want %q (%d)", g, got.Unselected, want, tc.unselected)
			}
			for _, name := range want {
				if slices.Contains(names(t, dir, sink.AreaQuarantine), name) {
					t.Fatalf("%s is still there", name)
				}
			}
			if left := names(t, dir, sink.AreaQuarantine); len(left) != 4-len(want) {
				t.Fatalf("left %q", left)
			}
		})
	}
}

// A ready segment whose other records were delivered already is selected
// whole by what is left of it: prune goes by the records not yet restored.
func TestPruneSelectCountsWhatIsLeft(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	seedSources(t, dir, sink.AreaReady, base, append(rep("loadtest", 5), rep("orders", 5)...))
	d := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: d})
	prune := func() dlqdump.PruneReport {
		t.Helper()
		rep, err := r.Prune(t.Context(), dlqdump.PruneOptions{Select: selection.Where(map[string]string{"source": "loadtest"}), Areas: []dlqdump.Area{dlqdump.AreaReady}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := prune(); len(rep.Expired) != 0 || rep.Unselected != 1 {
		t.Fatalf("before the orders were restored: %+v", rep)
	}
	if _, err := r.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"source": "orders"}}); err != nil {
		t.Fatal(err)
	}
	if len(d.items) != 5 {
		t.Fatalf("restored %d records, want the 5 orders", len(d.items))
	}
	rep := prune()
	if len(rep.Expired) != 1 || rep.Expired[0].Records != 5 {
		t.Fatalf("after the orders were restored: %+v", rep)
	}
	if left := names(t, dir, sink.AreaReady); len(left) != 0 {
		t.Fatalf("left %q", left)
	}
}

func mustParse(t *testing.T, expr string) *selection.Selection {
	t.Helper()
	s, err := selection.Parse(expr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package dlqdump_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// expiries records MetricsWriter.Expire calls.
type expiries struct {
	dlqdump.NopMetrics
	mu  sync.Mutex
	got []string
}

func (e *expiries) Expire(area, rule string, records int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, area+"/"+rule+"/"+itoa(records))
}

func itoa(n int) string {
	return string(rune('0'+n/100%10)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}

// seedAged writes segments of 10 records each into an area of dir, the
// i-th with records from base+i hours to base+i hours+9 seconds.
func seedAged(t *testing.T, dir string, area sink.Area, base time.Time, n int) []string {
	t.Helper()
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 10
	}
	return seedHourly(t, dir, area, base, counts, func(int, int) (map[string]string, []byte) { return nil, []byte("payload") })
}

// seedHourly writes a segment into an area of dir for each of counts,
// the i-th created at base+i hours with counts[i] records a second apart,
// record j of segment i holding what rec says.
func seedHourly(t *testing.T, dir string, area sink.Area, base time.Time, counts []int, rec func(i, j int) (map[string]string, []byte)) []string {
	t.Helper()
	rd := &fs.Reader{Directory: dir}
	var names []string
	for i, n := range counts {
		created := base.Add(time.Duration(i) * time.Hour)
		id := segment.NewID(created)
		name := segment.FileName(created, id)
		sw, err := rd.Create(t.Context(), area, name)
		if err != nil {
			t.Fatal(err)
		}
		w, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := range n {
			h, p := rec(i, j)
			if err := w.Add(created.Add(time.Duration(j)*time.Second), h, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

func names(t *testing.T, dir string, area sink.Area) []string {
	t.Helper()
	var out []string
	for si, err := range (&fs.Reader{Directory: dir}).List(t.Context(), area) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, si.Name)
	}
	return out
}

// Issue 14, retention: each rule on each area, a dry run first, every
// expired segment reported and counted with its area and rule.
func TestRetentionRules(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := base.Add(10 * time.Hour)
	for _, tc := range []struct {
		name   string
		area   sink.Area
		limits dlqdump.Limits
		want   []int // indexes of the segments that expire
		rule   string
	}{
		{"archive max age", sink.AreaArchive, dlqdump.Limits{MaxAge: 7*time.Hour + 30*time.Minute}, []int{0, 1, 2}, dlqdump.RuleMaxAge},
		// The segment started 8h before now holds a record 9s later:
		// not older than 8h as a whole.
		{"age of the newest record", sink.AreaArchive, dlqdump.Limits{MaxAge: 8 * time.Hour}, []int{0, 1}, dlqdump.RuleMaxAge},
		{"quarantine max segments", sink.AreaQuarantine, dlqdump.Limits{MaxSegments: 2}, []int{0, 1, 2}, dlqdump.RuleMaxSegments},
		{"ready max bytes", sink.AreaReady, dlqdump.Limits{MaxBytes: 1}, []int{0, 1, 2, 3, 4}, dlqdump.RuleMaxBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			all := seedAged(t, dir, tc.area, base, 5)
			mw := &expiries{}
			c := dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: &dest{}, MetricsWriter: mw}
			switch tc.area {
			case sink.AreaReady:
				c.Retention.Ready = tc.limits
			case sink.AreaQuarantine:
				c.Retention.Quarantine = tc.limits
			default:
				c.Retention.Archive = tc.limits
			}
			r := newRestorer(t, c)
			var want []string
			for _, i := range tc.want {
				want = append(want, all[i])
			}
			dry, err := r.Prune(t.Context(), dlqdump.PruneOptions{DryRun: true, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got := expiredNames(dry); !slices.Equal(got, want) {
				t.Fatalf("dry run expires %q, want %q", got, want)
			}
			if got := names(t, dir, tc.area); len(got) != 5 || len(mw.got) != 0 {
				t.Fatalf("the dry run changed something: %d segments left, metrics %q", len(got), mw.got)
			}
			rep, err := r.Prune(t.Context(), dlqdump.PruneOptions{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got := expiredNames(rep); !slices.Equal(got, want) {
				t.Fatalf("expired %q, want %q", got, want)
			}
			for _, ex := range rep.Expired {
				if ex.Rule != tc.rule || ex.Records != 10 || ex.Area != tc.area.String() || ex.Newest.Sub(ex.Oldest) != 9*time.Second {
					t.Fatalf("expired %+v", ex)
				}
			}
			if got, left := names(t, dir, tc.area), all[len(want):]; !slices.Equal(got, left) {
				t.Fatalf("left %q, want %q", got, left)
			}
			if len(mw.got) != len(want) || mw.got[0] != tc.area.String()+"/"+tc.rule+"/010" {
				t.Fatalf("metrics %q", mw.got)
			}
		})
	}
}

func expiredNames(rep dlqdump.PruneReport) []string {
	var out []string
	for _, ex := range rep.Expired {
		out = append(out, ex.Name)
	}
	return out
}

// A ready segment being restored is never expired under its claim; once the
// claim is released, it expires, counting only the records not delivered.
func TestRetentionSparesClaimedSegments(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	all := seedAged(t, dir, sink.AreaReady, base, 1)
	hold := &blockingDest{started: make(chan struct{}), release: make(chan struct{})}
	restorer := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: hold, Decoder: poisonDecoder{}})
	_ = restorer
	done := make(chan error, 1)
	go func() {
		_, err := restorer.Run(context.Background(), dlqdump.RunOptions{Limit: 3})
		done <- err
	}()
	<-hold.started
	mw := &expiries{}
	pruner := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: &dest{}, MetricsWriter: mw,
		Retention: dlqdump.Retention{Ready: dlqdump.Limits{MaxAge: time.Hour}}})
	rep, err := pruner.Prune(t.Context(), dlqdump.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Expired) != 0 || rep.Claimed != 1 {
		t.Fatalf("while claimed: %+v", rep)
	}
	close(hold.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rep, err = pruner.Prune(t.Context(), dlqdump.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Expired) != 1 || rep.Expired[0].Name != all[0] || rep.Expired[0].Records != 7 {
		t.Fatalf("after the pass released it: %+v", rep)
	}
	if n := len(names(t, dir, sink.AreaReady)); n != 0 {
		t.Fatalf("%d ready segments left", n)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, fs.ClaimsDir, "*")); len(left) != 0 {
		t.Fatalf("records left: %v", left)
	}
}

// A started Restorer enforces the retention by itself.
func TestRetentionInBackground(t *testing.T) {
	dir := t.TempDir()
	seedAged(t, dir, sink.AreaArchive, time.Now().Add(-48*time.Hour), 3)
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: &dest{},
		Retention: dlqdump.Retention{Archive: dlqdump.Limits{MaxAge: 24 * time.Hour}, Interval: 10 * time.Millisecond}})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); len(names(t, dir, sink.AreaArchive)) != 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("archive still holds %q", names(t, dir, sink.AreaArchive))
		}
	}
}

package changelog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/memsink"
)

// appendScenario appends n entries from two Logs over one store, as two
// processes would, taking turns (concurrently when together): the first
// page fills and the second starts on the way.
func appendScenario(t testing.TB, in *faults.Injector, n int, together bool) (*memsink.Store, []error) {
	st := memsink.New()
	wrapped := faults.WrapReader(st, in)
	logs := []*changelog.Log{open(t, wrapped), open(t, wrapped)}
	errs := make([]error, n)
	if !together {
		for i := range n {
			_, errs[i] = logs[i%2].Append(context.Background(), changelog.Entry{Action: changelog.ActionRelease, Scope: fmt.Sprint(i)})
		}
		return st, errs
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < n; i += 2 {
				_, errs[i] = logs[w].Append(context.Background(), changelog.Entry{Action: changelog.ActionRelease, Scope: fmt.Sprint(i)})
			}
		})
	}
	wg.Wait()
	return st, errs
}

// checkLog checks that the log of st holds each of the n entries once, in
// one chain, and each appender's in its order.
func checkLog(t testing.TB, st *memsink.Store, n int, together bool) {
	t.Helper()
	l := open(t, st)
	v, err := l.Verify(context.Background(), changelog.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if v.Entries != uint64(n) {
		t.Fatalf("%d entries, want %d", v.Entries, n)
	}
	seen := map[string]bool{}
	last := [2]int{-2, -1}
	for i, e := range all(t, l) {
		if seen[e.Scope] {
			t.Fatalf("entry %s appended twice", e.Scope)
		}
		seen[e.Scope] = true
		var k int
		fmt.Sscan(e.Scope, &k)
		if !together && k != i {
			t.Fatalf("entry %d is %s", i+1, e.Scope)
		}
		if k <= last[k%2] {
			t.Fatalf("entry %d after %d", k, last[k%2])
		}
		last[k%2] = k
	}
}

// TestAppendFaults fails every call of the store an append makes, the k-th
// for every k, without effect and after taking effect: each append still
// ends with its entry in the log once, and the chain holds.
func TestAppendFaults(t *testing.T) {
	// Pages of 4 entries: 10 entries fill two and start a third.
	defer changelog.SetPageEntries(4)()
	const n = 10
	for _, together := range []bool{false, true} {
		in := faults.New()
		st, errs := appendScenario(t, in, n, together)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		checkLog(t, st, n, together)
		counts := in.Counts()
		points := faults.All(counts, faults.Fail, faults.Lost)
		t.Logf("together=%v: %d calls %v, %d points", together, counts.Total(), counts, len(points))
		for _, p := range points {
			st, errs := appendScenario(t, faults.New(p), n, together)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("%s: append %d: %v", p, i, err)
				}
			}
			t.Run(p.String(), func(t *testing.T) { checkLog(t, st, n, together) })
		}
	}
}

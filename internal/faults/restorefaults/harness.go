package restorefaults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/segment"
)

// Harness runs the scenario with faults.
type Harness struct {
	// TempDir returns a new empty directory for one run. Required.
	TempDir func() (string, error)
	// Child returns a command running this program so that it calls
	// ChildMain (the harness adds EnvChild to its environment). Required
	// for the Crash and CrashAfter points.
	Child func() *exec.Cmd

	boundaries []int // deliveries at the end of each block, set by Count
}

// Result is the outcome of one run.
type Result struct {
	// What names the run: "without fault", a point, or "cancel after N".
	What string
	// Reached says whether the fault hit a call (or the cancellation
	// happened); a point not reached was not explored.
	Reached bool
	// Violations are the invariants the run broke.
	Violations []string
	// Duplicates is the number of extra deliveries, and Bound what the
	// invariants allow.
	Duplicates, Bound int
	// Fewer, for a point not reached, says that the run made fewer calls
	// of the point's operation than its K: the claim keeper renews on a
	// timer, so how many record writes a run makes depends on the
	// machine's speed, and a run can end before the K-th. Such a point was
	// not explored; it is no failure.
	Fewer bool
}

// Unexplored reports whether the run could not reach its point because it
// made fewer calls of the operation (Fewer).
func (r *Result) Unexplored() bool { return !r.Reached && r.Fewer }

// Held reports whether the point was reached and every invariant held.
func (r *Result) Held() bool { return r.Reached && len(r.Violations) == 0 }

func (r *Result) String() string {
	s := r.What
	switch {
	case !r.Reached && r.Fewer:
		s += ": not reached (the run made fewer calls of its operation: renewals depend on timing)"
	case !r.Reached:
		s += ": not reached"
	case len(r.Violations) > 0:
		s += ": " + strings.Join(r.Violations, "; ")
	default:
		s += fmt.Sprintf(": held (%d delivered twice, bound %d)", r.Duplicates, r.Bound)
	}
	return s
}

// outcome is what one run and the recovery after it did.
type outcome struct {
	delivered []string
	inProcess int  // of delivered, by restorers of this process
	childRan  bool // a child process restored too
	metrics   metrics
	stats     []dlqdump.RestorerStats
	errs      []error
}

// Count runs the scenario without a fault and returns the calls of every
// operation, and the result of checking it.
func (h *Harness) Count(ctx context.Context) (faults.Counts, *Result, error) {
	dir, err := h.TempDir()
	if err != nil {
		return nil, nil, err
	}
	items, maxBlock, err := Seed(dir)
	if err != nil {
		return nil, nil, err
	}
	in := faults.New()
	var out outcome
	dst := &destination{}
	out.metrics.blocks = &h.boundaries
	h.boundaries = nil
	r, err := dlqdump.NewRestorer(config(faults.WrapReader(&fs.Reader{Directory: dir}, in), dst, &out.metrics))
	if err != nil {
		return nil, nil, err
	}
	out.errs = append(out.errs, passes(ctx, r))
	out.stats = append(out.stats, r.Stats())
	_ = r.Close()
	out.delivered = dst.items()
	out.inProcess = len(out.delivered)
	res := &Result{What: "without fault", Reached: true}
	check(dir, items, maxBlock, 0, &out, res)
	if out.errs[0] != nil {
		res.Violations = append(res.Violations, "the run without fault failed: "+out.errs[0].Error())
	}
	return in.Counts(), res, nil
}

// Run runs the scenario with the fault at p: in process for Fail and Lost,
// in a child process for Crash and CrashAfter; then restorers without faults
// finish, and the invariants are checked.
func (h *Harness) Run(ctx context.Context, p faults.Point) (*Result, error) {
	dir, err := h.TempDir()
	if err != nil {
		return nil, err
	}
	items, maxBlock, err := Seed(dir)
	if err != nil {
		return nil, err
	}
	res := &Result{What: p.String()}
	var out outcome
	if p.Mode.Kills() {
		got, calls, killed, err := h.child(ctx, dir, p)
		if err != nil {
			return nil, err
		}
		out.delivered, res.Reached, out.childRan = got, killed, true
		res.Fewer = !killed && calls[p.Op] < p.K
	} else {
		in := faults.New(p)
		dst := &destination{}
		r, err := dlqdump.NewRestorer(config(faults.WrapReader(&fs.Reader{Directory: dir}, in), dst, &out.metrics))
		if err != nil {
			return nil, err
		}
		_ = passes(ctx, r) // errors are expected: the fault
		out.stats = append(out.stats, r.Stats())
		_ = r.Close()
		out.delivered = dst.items()
		out.inProcess = len(out.delivered)
		res.Reached = len(in.Fired()) > 0
		res.Fewer = !res.Reached && in.Counts()[p.Op] < p.K
	}
	if err := finish(ctx, dir, &out); err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	check(dir, items, maxBlock, 1, &out, res)
	return res, nil
}

// Cancel runs the scenario with the passes' context cancelled right after
// the destination accepted its n-th record, then finishes without faults: a
// cancelled pass saves where it stopped, so nothing may be delivered twice.
func (h *Harness) Cancel(ctx context.Context, n int) (*Result, error) {
	dir, err := h.TempDir()
	if err != nil {
		return nil, err
	}
	items, maxBlock, err := Seed(dir)
	if err != nil {
		return nil, err
	}
	res := &Result{What: fmt.Sprintf("cancel after %d deliveries", n)}
	var out outcome
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dst := &destination{onAccept: func(k int) {
		if k == n {
			cancel()
		}
	}}
	r, err := dlqdump.NewRestorer(config(&fs.Reader{Directory: dir}, dst, &out.metrics))
	if err != nil {
		return nil, err
	}
	_ = passes(cctx, r)
	res.Reached = cctx.Err() != nil // cancelled, if only after the last delivery
	out.stats = append(out.stats, r.Stats())
	_ = r.Close()
	out.delivered = dst.items()
	out.inProcess = len(out.delivered)
	if err := finish(ctx, dir, &out); err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	check(dir, items, maxBlock, 0, &out, res)
	return res, nil
}

// finish runs restorers without faults until the store is done: no ready
// segment and no claim left (a claim left by the run is taken over once seen
// unchanged for its lease).
func finish(ctx context.Context, dir string, out *outcome) error {
	dst := &destination{}
	r, err := dlqdump.NewRestorer(config(&fs.Reader{Directory: dir}, dst, &out.metrics))
	if err != nil {
		return err
	}
	defer func() {
		out.stats = append(out.stats, r.Stats())
		_ = r.Close()
		got := dst.items()
		out.delivered = append(out.delivered, got...)
		out.inProcess += len(got)
	}()
	deadline := time.Now().Add(time.Minute) // far above the few leases a run needs
	for {
		rep, err := r.Run(ctx, dlqdump.RunOptions{})
		if err == nil && rep.Claimed == 0 && r.Stats().Ready == 0 {
			// A record a dead restorer held is removed once seen
			// unchanged for its lease: wait for that too.
			left, gerr := leftovers(dir)
			if gerr != nil || len(left) == 0 {
				return gerr
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the store is not done a minute after the run: %+v, last error %v", r.Stats(), err)
		}
		t := time.NewTimer(claimsLease / 3)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// EnvChild is the environment variable that makes ChildMain run the scenario
// with a fault: it holds the directory and the point, as JSON.
const EnvChild = "DLQDUMP_RESTOREFAULTS_CHILD"

type childSpec struct {
	Dir   string `json:"dir"`
	Point string `json:"point"`
}

// IsChild reports whether this process was started to run ChildMain.
func IsChild() bool { return os.Getenv(EnvChild) != "" }

// ChildMain runs the scenario EnvChild describes, printing each record the
// destination accepts on its own line, until the fault kills the process.
// If the fault is not reached, it prints the calls it made last, on a line
// starting with callsLine.
func ChildMain() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(EnvChild)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "restorefaults child:", err)
		return 2
	}
	p, err := faults.ParsePoint(spec.Point)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restorefaults child:", err)
		return 2
	}
	in := faults.New(p)
	var mw metrics
	print := &printing{dst: &destination{}, w: os.Stdout}
	c := config(faults.WrapReader(&fs.Reader{Directory: spec.Dir}, in), nil, &mw)
	c.Queue = print
	r, err := dlqdump.NewRestorer(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restorefaults child:", err)
		return 2
	}
	_ = passes(context.Background(), r)
	_ = r.Close()
	b, _ := json.Marshal(in.Counts())
	fmt.Fprintf(os.Stdout, "%s%s\n", callsLine, b)
	return 0 // the fault was not reached
}

// callsLine starts the line on which a child that was not killed reports
// its calls; no record starts so.
const callsLine = "#calls "

// printing is a destination that writes each accepted record to w at once.
type printing struct {
	dst *destination
	w   *os.File
}

func (p *printing) Enqueue(x any) error {
	if err := p.dst.Enqueue(x); err != nil {
		return err
	}
	_, err := fmt.Fprintln(p.w, x.(string))
	return err
}

// child runs the scenario in a child process with the fault at p and returns
// what it delivered, the calls it made when it was not killed, and whether
// the fault killed it.
func (h *Harness) child(ctx context.Context, dir string, p faults.Point) ([]string, faults.Counts, bool, error) {
	spec, _ := json.Marshal(childSpec{Dir: dir, Point: p.String()})
	cmd := h.Child()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, EnvChild+"="+string(spec))
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	killed := false
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed, err = true, nil
		}
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("restorefaults child at %s: %w", p, err)
	}
	var got []string
	var calls faults.Counts
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if c, ok := strings.CutPrefix(line, callsLine); ok {
			if err := json.Unmarshal([]byte(c), &calls); err != nil {
				return nil, nil, false, fmt.Errorf("restorefaults child at %s: its calls: %w", p, err)
			}
			continue
		}
		got = append(got, strings.Fields(line)...)
	}
	return got, calls, killed, ctx.Err()
}

// check tests the invariants after a run and its recovery, with up to
// interruptions blocks of duplicates allowed.
func check(dir string, items []string, maxBlock, interruptions int, out *outcome, res *Result) {
	fail := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	seen := map[string]int{}
	for _, it := range out.delivered {
		seen[it]++
	}
	quar, err := payloads(filepath.Join(dir, fs.QuarantineDir))
	if err != nil {
		fail("read quarantine: %v", err)
	}
	inQuar := map[string]int{}
	for _, it := range quar {
		inQuar[it]++
	}
	for _, it := range items {
		undeliverable := strings.HasPrefix(it, poison) || strings.HasPrefix(it, refused)
		switch {
		case undeliverable && inQuar[it] != 1:
			fail("%s is in quarantine %d times, want once", it, inQuar[it])
		case undeliverable && seen[it] > 0:
			fail("%s was delivered", it)
		case !undeliverable && seen[it] == 0:
			fail("%s was never delivered (in quarantine %d times)", it, inQuar[it])
		case !undeliverable && inQuar[it] > 0:
			fail("%s was delivered and is in quarantine", it)
		}
		if seen[it] > 1 {
			res.Duplicates += seen[it] - 1
		}
	}
	if len(inQuar) != 2 {
		fail("quarantine holds %d distinct records, want the 2 undeliverable ones", len(inQuar))
	}
	// A block of a side segment the run wrote counts as a block too.
	if m, err := largestBlock(filepath.Join(dir, fs.ArchiveDir)); err == nil {
		maxBlock = max(maxBlock, m)
	}
	res.Bound = interruptions * maxBlock
	if res.Duplicates > res.Bound {
		fail("%d records delivered twice, more than %d blocks of at most %d records", res.Duplicates, interruptions, maxBlock)
	}
	left, err := leftovers(dir)
	if err != nil {
		fail("list the store: %v", err)
	}
	if len(left) > 0 {
		fail("left in the store: %v", left)
	}
	archived, err := filepath.Glob(filepath.Join(dir, fs.ArchiveDir, "*.dlq"))
	if err != nil || len(archived) < 3 {
		fail("%d segments archived, want the 3 originals at least", len(archived))
	}
	// A child's counters die with it: the metrics cover the runs in this
	// process, and so does what they are compared with.
	var restored uint64
	for _, s := range out.stats {
		restored += s.Restored
	}
	if got := uint64(out.metrics.restored.Load()); got != restored || got != uint64(out.inProcess) {
		fail("metrics count %d records restored, Stats %d; the destination received %d from restorers in this process", got, restored, out.inProcess)
	}
	if got := out.metrics.quarantined.Load(); got > int64(len(quar)) || !out.childRan && got != int64(len(quar)) {
		fail("metrics count %d records quarantined; the quarantine holds %d", got, len(quar))
	}
}

// payloads returns the payloads of every segment in dir.
func payloads(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.dlq"))
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	var out []string
	for _, p := range paths {
		recs, err := readAll(p)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

// leftovers lists what must not be left: ready segments, temporary files,
// claim records.
func leftovers(dir string) ([]string, error) {
	var left []string
	for _, pat := range []string{"*.dlq", ".*.part", ".*.open", fs.QuarantineDir + "/.*.part", fs.ArchiveDir + "/.*.part", fs.ClaimsDir + "/*"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			// A quarantined segment may keep its record (its files:
			// NAME.claim and, rarely, successors NAME.claim@ID).
			if n, _, ok := strings.Cut(filepath.Base(p), ".claim"); ok {
				if _, err := os.Stat(filepath.Join(dir, fs.QuarantineDir, n)); err == nil {
					continue
				}
			}
			left = append(left, strings.TrimPrefix(p, dir+"/"))
		}
	}
	return left, nil
}

// readAll returns the payloads of the segment at path.
func readAll(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	r, err := segment.NewReader(f, st.Size(), nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, string(rec.Payload))
	}
}

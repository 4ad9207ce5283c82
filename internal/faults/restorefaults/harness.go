package restorefaults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/sink"
)

// Harness runs the scenario with faults.
type Harness struct {
	// Store makes the place of each run: directories, or prefixes of an
	// S3 bucket. Required.
	Store Store
	// Variant is the form of the scenario's data (encrypted or not).
	Variant Variant
	// Child returns a command running this program so that it calls
	// ChildMain (the harness adds EnvChild to its environment). Required
	// for the Crash and CrashAfter points.
	Child func() *exec.Cmd

	boundaries []int // deliveries at the end of each block, set by Count
}

// start makes and seeds the place of a run.
func (h *Harness) start() (*Place, *seeded, []envelope.Identity, error) {
	p, err := h.Store.New()
	if err != nil {
		return nil, nil, nil, err
	}
	sd, err := Seed(p, h.Variant)
	if err != nil {
		return nil, nil, nil, err
	}
	ids, err := identities(sd.identity)
	return p, sd, ids, err
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
	// invariants allow in all: one block per interruption of each segment
	// in flight.
	Duplicates, Bound int
	// Segments is the number of segments whose records were delivered
	// twice.
	Segments int
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
		s += fmt.Sprintf(": held (%d delivered twice, of %d segments; bound %d)", r.Duplicates, r.Segments, r.Bound)
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

// absorb adds what x did (the restorer taking over during a pause) to o.
func (o *outcome) absorb(x *outcome) {
	o.delivered = append(o.delivered, x.delivered...)
	o.inProcess += x.inProcess
	o.stats = append(o.stats, x.stats...)
	o.errs = append(o.errs, x.errs...)
	o.metrics.restored.Add(x.metrics.restored.Load())
	o.metrics.quarantined.Add(x.metrics.quarantined.Load())
}

// Count runs the scenario without a fault and returns the calls of every
// operation, and the result of checking it.
func (h *Harness) Count(ctx context.Context) (faults.Counts, *Result, error) {
	p, sd, ids, err := h.start()
	if err != nil {
		return nil, nil, err
	}
	in := faults.New()
	var out outcome
	dst := &destination{}
	out.metrics.blocks = &h.boundaries
	h.boundaries = nil
	rd := faults.WrapReader(p.Reader, in)
	r, err := dlqdump.NewRestorer(config(rd, dst, &out.metrics, ids))
	if err != nil {
		return nil, nil, err
	}
	out.errs = append(out.errs, drive(ctx, h.Variant, rd, r, nil))
	out.stats = append(out.stats, r.Stats())
	_ = r.Close()
	out.delivered = dst.items()
	out.inProcess = len(out.delivered)
	res := &Result{What: "without fault", Reached: true}
	check(p, sd, 0, &out, res)
	if out.errs[0] != nil {
		res.Violations = append(res.Violations, "the run without fault failed: "+out.errs[0].Error())
	}
	return in.Counts(), res, nil
}

// Run runs the scenario with the fault at p: in process for Fail, Lost,
// Pause and PauseAfter (while the run is paused, restorers without faults
// take its claims over and finish the store, and then it goes on), in a
// child process for Crash and CrashAfter; then restorers without faults
// finish, and the invariants are checked.
func (h *Harness) Run(ctx context.Context, pt faults.Point) (*Result, error) {
	p, sd, ids, err := h.start()
	if err != nil {
		return nil, err
	}
	res := &Result{What: pt.String()}
	var out outcome
	if pt.Mode.Kills() {
		got, calls, killed, err := h.child(ctx, p, sd, pt)
		if err != nil {
			return nil, err
		}
		out.delivered, res.Reached, out.childRan = got, killed, true
		res.Fewer = !killed && calls[pt.Op] < pt.K
	} else if _, err := h.inProcess(ctx, p, ids, pt, nil, nil, &out, res); err != nil {
		return nil, err // errors of the run are expected: the fault
	}
	for _, err := range out.errs {
		res.Violations = append(res.Violations, err.Error())
	}
	if err := finish(ctx, p, ids, h.Variant, nil, &out); err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	check(p, sd, 1, &out, res)
	return res, nil
}

// inProcess runs the scenario in this process with the fault at pt (a
// point of an in-process mode, or faults.Mark), into out and res: before,
// when not nil, is called when it fires; with a pause, restorers without
// faults (watched by w in a control run) take its claims over and finish
// the store meanwhile, then it goes on. It returns what driving the
// scenario returned.
func (h *Harness) inProcess(ctx context.Context, p *Place, ids []envelope.Identity, pt faults.Point, w *controlWatch, before func(), out *outcome, res *Result) (driven, err error) {
	in := faults.New(pt)
	var taker sync.WaitGroup
	var taken outcome
	in.OnFire = func(faults.Point) {
		if before != nil {
			before()
		}
		if !pt.Mode.Pauses() {
			return
		}
		// Paused as a stopped process: another restorer takes its claims
		// over and finishes the store, then it goes on.
		taker.Add(1)
		go func() {
			defer taker.Done()
			defer in.Resume()
			if err := finish(ctx, p, ids, h.Variant, w, &taken); err != nil {
				taken.errs = append(taken.errs, fmt.Errorf("the restorer taking over during the pause: %w", err))
			}
		}()
	}
	dst := &destination{}
	rd := faults.WrapReader(p.Reader, in)
	r, err := dlqdump.NewRestorer(config(rd, dst, &out.metrics, ids))
	if err != nil {
		return nil, err
	}
	driven = drive(ctx, h.Variant, rd, r, w)
	taker.Wait()
	in.Resume() // a pause that fired after the passes gave up
	out.stats = append(out.stats, r.Stats())
	_ = r.Close()
	out.delivered = dst.items()
	out.inProcess = len(out.delivered)
	out.absorb(&taken)
	res.Reached = len(in.Fired()) > 0
	res.Fewer = !res.Reached && in.Counts()[pt.Op] < pt.K
	return driven, nil
}

// Cancel runs the scenario with the passes' context cancelled right after
// the destination accepted its n-th record, then finishes without faults: a
// cancelled pass saves where it stopped, so nothing may be delivered twice.
func (h *Harness) Cancel(ctx context.Context, n int) (*Result, error) {
	p, sd, ids, err := h.start()
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
	r, err := dlqdump.NewRestorer(config(p.Reader, dst, &out.metrics, ids))
	if err != nil {
		return nil, err
	}
	_ = drive(cctx, h.Variant, p.Reader, r, nil)
	res.Reached = cctx.Err() != nil // cancelled, if only after the last delivery
	out.stats = append(out.stats, r.Stats())
	_ = r.Close()
	out.delivered = dst.items()
	out.inProcess = len(out.delivered)
	if err := finish(ctx, p, ids, h.Variant, nil, &out); err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	check(p, sd, 0, &out, res)
	return res, nil
}

// finish runs restorers without faults until the store is done: no ready
// segment and no claim left (a claim left by the run is taken over once seen
// unchanged for its lease); with jobs, the jobs are run to their end first
// (w watching them in a control run).
func finish(ctx context.Context, p *Place, ids []envelope.Identity, v Variant, w *controlWatch, out *outcome) error {
	dst := &destination{}
	r, err := dlqdump.NewRestorer(config(p.Reader, dst, &out.metrics, ids))
	if err != nil {
		return err
	}
	if v.Act {
		// A discard the run did not finish is run again first, as its
		// user would; a replay needs no second run (the passes deliver
		// the record anyway).
		if err := rediscard(ctx, p, r); err != nil {
			out.stats = append(out.stats, r.Stats())
			_ = r.Close()
			return err
		}
	}
	if v.Jobs {
		// The jobs end first: completed, each once, whatever the run
		// left of them.
		if err := runJobs(ctx, p.Reader, r, w); err != nil {
			out.stats = append(out.stats, r.Stats())
			_ = r.Close()
			got := dst.items()
			out.delivered = append(out.delivered, got...)
			out.inProcess += len(got)
			return fmt.Errorf("the jobs did not complete after the run: %w", err)
		}
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
			left, gerr := p.leftovers(false)
			if gerr != nil || len(left) == 0 {
				return gerr
			}
		}
		if time.Now().After(deadline) {
			left, _ := p.leftovers(true)
			var recs []string
			for _, l := range left {
				if name, ok := strings.CutPrefix(l, "record "); ok {
					data, version, rerr := p.Reader.ReadRecord(ctx, name)
					recs = append(recs, fmt.Sprintf("%s at version %q: %s (read error %v)", name, version, data, rerr))
				}
			}
			return fmt.Errorf("the store is not done a minute after the run: %+v, last error %v, left %v; records left: %v", r.Stats(), err, left, recs)
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

// rediscard runs the Act variant's discard until its records are in the
// quarantine: the discard the run made may have been cut short.
func rediscard(ctx context.Context, p *Place, r *dlqdump.Restorer) error {
	deadline := time.Now().Add(time.Minute)
	for {
		quar, err := p.payloads(sink.AreaQuarantine, nil)
		if err != nil {
			return err
		}
		n := 0
		for _, it := range quar {
			if isDiscarded(it) {
				n++
			}
		}
		if n >= len(discarded) {
			return nil
		}
		derr := act(ctx, p.Reader, r, false)
		if time.Now().After(deadline) {
			return fmt.Errorf("the discard did not complete a minute after the run: %d of %d records in the quarantine, last error %v", n, len(discarded), derr)
		}
		t := time.NewTimer(claimsLease / 3) // a claim the run left expires
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// EnvChild is the environment variable that makes ChildMain run the scenario
// with a fault: it holds the place, the identity of an encrypted scenario and
// the point, as JSON.
const EnvChild = "DLQDUMP_RESTOREFAULTS_CHILD"

type childSpec struct {
	Place    placeSpec `json:"place"`
	Identity string    `json:"identity,omitempty"`
	Point    string    `json:"point"`
	Jobs     bool      `json:"jobs,omitempty"`
	Act      bool      `json:"act,omitempty"`
	Carve    bool      `json:"carve,omitempty"`
}

// IsChild reports whether this process was started to run ChildMain.
func IsChild() bool { return os.Getenv(EnvChild) != "" }

// ChildMain runs the scenario EnvChild describes, printing each record the
// destination accepts on its own line, until the fault kills the process.
// If the fault is not reached, it prints the calls it made last, on a line
// starting with callsLine.
func ChildMain() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "restorefaults child:", err)
		return 2
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(EnvChild)), &spec); err != nil {
		return fail(err)
	}
	pt, err := faults.ParsePoint(spec.Point)
	if err != nil {
		return fail(err)
	}
	p, err := openPlace(spec.Place)
	if err != nil {
		return fail(err)
	}
	ids, err := identities(spec.Identity)
	if err != nil {
		return fail(err)
	}
	in := faults.New(pt)
	var mw metrics
	rd := faults.WrapReader(p.Reader, in)
	c := config(rd, nil, &mw, ids)
	c.Queue = &printing{dst: &destination{}, w: os.Stdout}
	r, err := dlqdump.NewRestorer(c)
	if err != nil {
		return fail(err)
	}
	_ = drive(context.Background(), Variant{Jobs: spec.Jobs, Act: spec.Act, Carve: spec.Carve}, rd, r, nil)
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

// child runs the scenario in a child process with the fault at pt and
// returns what it delivered, the calls it made when it was not killed, and
// whether the fault killed it.
func (h *Harness) child(ctx context.Context, p *Place, sd *seeded, pt faults.Point) ([]string, faults.Counts, bool, error) {
	spec, _ := json.Marshal(childSpec{Place: p.spec, Identity: sd.identity, Point: pt.String(), Jobs: h.Variant.Jobs, Act: h.Variant.Act, Carve: h.Variant.Carve})
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
		return nil, nil, false, fmt.Errorf("restorefaults child at %s: %w", pt, err)
	}
	var got []string
	var calls faults.Counts
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if c, ok := strings.CutPrefix(line, callsLine); ok {
			if err := json.Unmarshal([]byte(c), &calls); err != nil {
				return nil, nil, false, fmt.Errorf("restorefaults child at %s: its calls: %w", pt, err)
			}
			continue
		}
		got = append(got, strings.Fields(line)...)
	}
	return got, calls, killed, ctx.Err()
}

// check tests the invariants after a run and its recovery, with up to
// interruptions blocks of duplicates allowed per segment (a segment's
// records are those of its letter: a, b, c), of at most SegmentsInFlight
// segments.
func check(p *Place, sd *seeded, interruptions int, out *outcome, res *Result) {
	fail := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	seen := map[string]int{}
	for _, it := range out.delivered {
		seen[it]++
	}
	twice := map[byte]int{} // by segment
	quar, err := p.payloads(sink.AreaQuarantine, sd.keys)
	if err != nil {
		fail("read quarantine: %v", err)
	}
	inQuar := map[string]int{}
	for _, it := range quar {
		inQuar[it]++
	}
	for _, it := range sd.items {
		undeliverable := strings.HasPrefix(it, poison) || strings.HasPrefix(it, refused) || sd.act && isDiscarded(it)
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
			twice[it[0]] += seen[it] - 1
		}
	}
	res.Segments = len(twice)
	if want := 2 + map[bool]int{true: len(discarded)}[sd.act]; len(inQuar) != want {
		fail("quarantine holds %d distinct records, want the %d undeliverable ones", len(inQuar), want)
	}
	// A block of a side segment the run wrote counts as a block too.
	maxBlock := sd.maxBlock
	if m, err := p.largestBlock(sink.AreaArchive, sd.keys); err == nil {
		maxBlock = max(maxBlock, m)
	}
	res.Bound = interruptions * maxBlock * min(segments, dlqdump.DefaultSegmentsInFlight)
	for seg, n := range twice {
		if n > interruptions*maxBlock {
			fail("%d records of segment %c delivered twice, more than %d blocks of at most %d records", n, seg, interruptions, maxBlock)
		}
	}
	if len(twice) > interruptions*dlqdump.DefaultSegmentsInFlight {
		fail("records of %d segments delivered twice, more than the %d in flight per interruption", len(twice), dlqdump.DefaultSegmentsInFlight)
	}
	left, err := p.leftovers(true)
	if err != nil {
		fail("list the store: %v", err)
	}
	if len(left) > 0 {
		fail("left in the store: %v", left)
	}
	archived, err := p.segmentNames(sink.AreaArchive)
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

// Package jobsim runs seed 002's test of restore jobs: many one-off jobs,
// due over a span of time, run by several runner processes coordinating
// only through the store, some of them killed (SIGKILL) and restarted
// meanwhile. It checks that every job ran once and completed, none started
// before its second, and every record was delivered once (at most a block
// twice per kill), and measures how late the jobs started.
// TestJobsSeed002 runs a sample; cmd/dlqdump-reliability the whole.
//
// The runner processes are this program started again: its main (or
// TestMain) must call ChildMain when IsChild reports true.
package jobsim

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// Options describe a run.
type Options struct {
	// Store is where the segments and the jobs are.
	Store drainers.Store
	// Jobs is how many jobs, one per segment of Records records, due
	// evenly over Span from a few seconds after they are created.
	Jobs, Records int
	Span          time.Duration
	// Runners is how many runner processes, Restorers how many jobs
	// each runs at once.
	Runners, Restorers int
	// Kills is how many runners are killed (SIGKILL) and restarted, one
	// after another, spread over the span.
	Kills int
	// Lease is the runners' lease on jobs and segments.
	Lease time.Duration
	// Grace is how long after the span the jobs have to end before the
	// run fails, naming those still open. Default 10 minutes.
	Grace time.Duration
	// Child returns a command running this program so that it calls
	// ChildMain (EnvChild is added to its environment).
	Child func() *exec.Cmd
	// Created, if set, is called once the jobs are created, before the
	// runners start (to count what the runs cost, say).
	Created func()
	// Lead is how long after Run starts creating the jobs the first is
	// due. Default 3 s and 3 ms a job (creating one takes four requests,
	// some 2 ms of a loaded 2-core machine beside an S3 server), or 3 s
	// and four times as long as seeding the segments took when that is
	// longer (a loaded machine); a run on a machine where creating them
	// takes longer still fails, rather than count that time in the start
	// delays.
	Lead time.Duration
	// Profile, if set, is a directory where each runner process writes
	// its CPU profile (RUNNER.pprof) when it exits on SIGTERM (a runner
	// killed writes none).
	Profile string
}

// Result is what a run did.
type Result struct {
	Jobs, Records int
	// Completed counts the jobs that completed; Early those that started
	// before their second.
	Completed, Early int
	// Lost and Twice count the records never delivered, and those
	// delivered more than once; Bound is what the kills allow (a block
	// per kill: here a segment of Records per kill and runner job).
	Lost, Twice, Bound int
	// TakenOver counts the jobs a runner took over from a killed one.
	TakenOver int
	// P50, P99 and Max are how late the jobs started after their second,
	// over those not taken over.
	P50, P99, Max time.Duration
	// Took is how long the run took, from the first job due to the last
	// one completed.
	Took time.Duration
	// RunnerCPU is the CPU time (user and system) the runner processes
	// took, killed ones included; ServerCPU that of the S3 server over
	// the same time, when it is a process of this machine (else zero).
	RunnerCPU, ServerCPU time.Duration
	// Requests are the S3 requests the runner processes made, by
	// operation (a killed runner's as of its last second), on S3.
	Requests s3test.Counts
	Problems []string
}

// RunnerCPUPerJob returns the runners' CPU time per job.
func (r *Result) RunnerCPUPerJob() time.Duration {
	return r.RunnerCPU / time.Duration(max(r.Jobs, 1))
}

// OK reports whether every job ran once and every record was delivered
// within the bound.
func (r *Result) OK() bool {
	return r.Completed == r.Jobs && r.Early == 0 && r.Lost == 0 && r.Twice <= r.Bound && len(r.Problems) == 0
}

func (r *Result) String() string {
	s := fmt.Sprintf("%d jobs (%d records) due over the span: %d completed, %d started early, %d taken over; %d records lost, %d delivered twice (bound %d); start delay p50 %s, p99 %s, max %s; done in %s; runners' CPU %s per job",
		r.Jobs, r.Records, r.Completed, r.Early, r.TakenOver, r.Lost, r.Twice, r.Bound,
		r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond), r.Took.Round(time.Second),
		r.RunnerCPUPerJob().Round(time.Microsecond))
	if r.ServerCPU > 0 {
		s += fmt.Sprintf(", server's %s", (r.ServerCPU / time.Duration(max(r.Jobs, 1))).Round(time.Microsecond))
	}
	if len(r.Requests) > 0 {
		s += fmt.Sprintf("; S3 requests per job %.2f (%s)", float64(r.Requests.Total())/float64(max(r.Jobs, 1)), r.Requests.Per(max(r.Jobs, 1)))
	}
	return s
}

// EnvChild holds a runner's spec, as JSON, in a runner process.
const EnvChild = "DLQDUMP_JOBSIM_RUNNER"

type childSpec struct {
	Store     drainers.Store `json:"store"`
	Owner     string         `json:"owner"`
	Restorers int            `json:"restorers"`
	Lease     time.Duration  `json:"lease"`
	Profile   string         `json:"profile,omitempty"`
	// Counts is where the runner writes the S3 requests it made, every
	// second and when it exits.
	Counts string `json:"counts,omitempty"`
}

// IsChild reports whether this process was started as a runner by Run.
func IsChild() bool { return os.Getenv(EnvChild) != "" }

// ChildMain runs jobs until killed or SIGTERM, printing each item it
// delivers on a line of its own. It returns the exit status.
func ChildMain() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(EnvChild)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "jobsim runner:", err)
		return 2
	}
	if spec.Profile != "" {
		stop, err := profileCPU(filepath.Join(spec.Profile, spec.Owner+".pprof"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobsim runner:", err)
			return 2
		}
		defer stop()
	}
	rd := spec.Store.Reader()
	if spec.Store.S3 != nil && spec.Counts != "" {
		var c s3test.Counter
		srv := spec.Store.S3
		rd = &s3.Reader{Client: srv.Client(func(o *awss3.Options) { o.HTTPClient = c.Wrap(o.HTTPClient) }), Bucket: srv.Bucket, Prefix: spec.Store.Prefix}
		defer writeCounts(spec.Counts, &c)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					writeCounts(spec.Counts, &c)
				case <-stop:
					return
				}
			}
		}()
	}
	st, err := jobs.Open(rd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobsim runner:", err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	dst := queueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := out.WriteString(x.(string) + "\n")
		if err == nil {
			err = out.Flush() // a kill loses nothing printed
		}
		return err
	})
	var rs []*dlqdump.Restorer
	for range spec.Restorers {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Queue: dst, Owner: spec.Owner, Lease: spec.Lease,
			Decoder: stringDecoder{}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobsim runner:", err)
			return 1
		}
		rs = append(rs, r)
	}
	rn, err := jobs.NewRunner(st, rs, &jobs.RunnerOptions{Owner: spec.Owner, Lease: spec.Lease})
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobsim runner:", err)
		return 1
	}
	if err := rn.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "jobsim runner:", err)
		return 1
	}
	term := make(chan os.Signal, 1)
	signalNotify(term)
	<-term
	_ = rn.Close()
	for _, r := range rs {
		_ = r.Close()
	}
	return 0
}

type queueFunc func(any) error

func (f queueFunc) Enqueue(x any) error { return f(x) }

type stringDecoder struct{}

func (stringDecoder) Decode(b []byte) (any, error) { return string(b), nil }

// profileCPU writes a CPU profile into file until stop is called.
func profileCPU(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeCounts writes the requests c counted into file, whole or not at
// all.
func writeCounts(file string, c *s3test.Counter) {
	b, err := json.Marshal(c.Counts())
	if err != nil {
		return
	}
	if err := os.WriteFile(file+".tmp", b, 0o644); err == nil {
		_ = os.Rename(file+".tmp", file)
	}
}

// readCounts sums the requests the runners wrote into dir.
func readCounts(dir string) s3test.Counts {
	sum := s3test.Counts{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var c s3test.Counts
		if json.Unmarshal(b, &c) == nil {
			for op, n := range c {
				sum[op] += n
			}
		}
	}
	return sum
}

// runner is a runner process and what it printed.
type runner struct {
	cmd  *exec.Cmd
	mu   *sync.Mutex
	got  *[]string
	done chan struct{}
	cpu  time.Duration // the CPU time it took, once done
}

// start starts runner p.
func start(o *Options, counts string, p, gen int, mu *sync.Mutex, got *[]string) (*runner, error) {
	owner := fmt.Sprintf("runner-%d-%d", p, gen)
	if counts != "" {
		counts = filepath.Join(counts, owner+".json")
	}
	spec, err := json.Marshal(childSpec{Store: o.Store, Owner: owner, Restorers: o.Restorers, Lease: o.Lease,
		Profile: o.Profile, Counts: counts})
	if err != nil {
		return nil, err
	}
	cmd := o.Child()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, EnvChild+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rn := &runner{cmd: cmd, mu: mu, got: got, done: make(chan struct{})}
	go func() {
		defer close(rn.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			*got = append(*got, sc.Text())
			mu.Unlock()
		}
		_ = cmd.Wait()
		if ps := cmd.ProcessState; ps != nil {
			rn.cpu = ps.UserTime() + ps.SystemTime()
		}
	}()
	return rn, nil
}

// Run seeds the store, creates the jobs, runs the runners (killing and
// restarting some) until every job has ended, and checks the outcome.
func Run(ctx context.Context, o Options) (*Result, error) {
	rd := o.Store.Reader()
	seedStart := time.Now()
	items, err := drainers.Seed(ctx, rd, o.Jobs, o.Records)
	if err != nil {
		return nil, err
	}
	seeded := time.Since(seedStart)
	var names []string
	for n, err := range sink.Names(ctx, rd, sink.AreaReady) {
		if err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) != o.Jobs {
		return nil, fmt.Errorf("jobsim: %d segments seeded, want %d", len(names), o.Jobs)
	}
	st, err := jobs.Open(rd)
	if err != nil {
		return nil, err
	}
	// Due from a few seconds on, after the jobs are created.
	lead := o.Lead
	if lead <= 0 {
		// Creating a job takes four requests, seeding its segment about
		// one, on the same store and machine: four times the seeding's
		// time follows the machine's load, which a fixed allowance per
		// job does not (issue 30: a loaded machine took longer).
		lead = 3*time.Second + max(time.Duration(o.Jobs)*3*time.Millisecond, 4*seeded)
	}
	first := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	if err := create(ctx, st, names, first, o.Span); err != nil {
		return nil, err
	}
	if now := time.Now(); now.After(first) {
		return nil, fmt.Errorf("jobsim: creating the %d jobs took until %s after the first was due: the start delays would count it", o.Jobs, now.Sub(first).Round(time.Millisecond))
	}
	if o.Created != nil {
		o.Created()
	}
	server0 := serverCPU(&o.Store)
	counts := ""
	if o.Store.S3 != nil {
		if counts, err = os.MkdirTemp("", "jobsim-counts-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(counts)
	}
	var mu sync.Mutex
	got := make([][]string, o.Runners)
	runners := make([]*runner, o.Runners)
	for p := range o.Runners {
		if runners[p], err = start(&o, counts, p, 0, &mu, &got[p]); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, r := range runners {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	}()
	res := &Result{Jobs: o.Jobs, Records: len(items), Bound: o.Kills * o.Restorers * o.Records}
	// Kill runner k%Runners at (k+1)/(Kills+1) of the span, restart it a
	// lease later (its claims are taken over meanwhile).
	for k := range o.Kills {
		at := first.Add(o.Span * time.Duration(k+1) / time.Duration(o.Kills+1))
		if err := sleepUntil(ctx, at); err != nil {
			return res, err
		}
		p := k % o.Runners
		_ = runners[p].cmd.Process.Signal(syscall.SIGKILL)
		<-runners[p].done
		res.RunnerCPU += runners[p].cpu
		if err := sleepUntil(ctx, time.Now().Add(o.Lease)); err != nil {
			return res, err
		}
		if runners[p], err = start(&o, counts, p, k+1, &mu, &got[p]); err != nil {
			return res, err
		}
	}
	grace := o.Grace
	if grace <= 0 {
		grace = 10 * time.Minute
	}
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		seen := make(map[string]struct{}, len(items))
		for _, out := range got {
			for _, it := range out {
				seen[it] = struct{}{}
			}
		}
		return len(seen)
	}
	all, err := waitAll(ctx, st, o.Jobs, first.Add(o.Span+grace), func() bool { return delivered() >= len(items) })
	res.Took = time.Since(first)
	for _, r := range runners {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		<-r.done
		res.RunnerCPU += r.cpu
	}
	if server := serverCPU(&o.Store); server0 > 0 && server > server0 {
		res.ServerCPU = server - server0
	}
	if counts != "" {
		res.Requests = readCounts(counts)
	}
	if err != nil {
		return res, err
	}
	check(res, all, items, got, &mu)
	return res, nil
}

// create creates one job per segment, due evenly over span from first,
// several at a time.
func create(ctx context.Context, st *jobs.Store, names []string, first time.Time, span time.Duration) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				at := first.Add(span * time.Duration(i) / time.Duration(len(names)))
				_, err := st.Create(ctx, jobs.Spec{ID: fmt.Sprintf("job-%06d", i), At: at, Segments: []string{names[i]}})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// waitAll returns every job once all have ended, or fails at deadline. It
// reads the jobs (every record: a load on the store of its own) only once
// done says the runners delivered every record, or at the deadline.
func waitAll(ctx context.Context, st *jobs.Store, n int, deadline time.Time, done func() bool) ([]jobs.Job, error) {
	for {
		if !done() && time.Now().Before(deadline) {
			if err := sleepUntil(ctx, time.Now().Add(time.Second)); err != nil {
				return nil, err
			}
			continue
		}
		var all []jobs.Job
		ended := 0
		for j, err := range st.List(ctx) {
			if err != nil {
				return nil, err
			}
			all = append(all, j)
			if j.State.Final() {
				ended++
			}
		}
		if ended == n {
			return all, nil
		}
		if time.Now().After(deadline) {
			var open []string
			for _, j := range all {
				if !j.State.Final() && len(open) < 5 {
					open = append(open, fmt.Sprintf("%s %s at %s (passes %d, failures %d, runner %q, error %q)",
						j.ID, j.State, j.At.Format(time.RFC3339), j.Attempts, j.Failures, j.Runner, j.Error))
				}
			}
			return all, fmt.Errorf("jobsim: %d of %d jobs ended by the deadline; open: %s", ended, n, strings.Join(open, "; "))
		}
		if err := sleepUntil(ctx, time.Now().Add(time.Second)); err != nil {
			return nil, err
		}
	}
}

// serverCPU returns the CPU time the store's S3 server took so far, when it
// is a process of this machine (s3test.Server.PID), else zero.
func serverCPU(st *drainers.Store) time.Duration {
	if st.S3 == nil {
		return 0
	}
	return childproc.CPU(st.S3.PID)
}

func sleepUntil(ctx context.Context, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// check fills in the outcome.
func check(res *Result, all []jobs.Job, items []string, got [][]string, mu *sync.Mutex) {
	var delays []time.Duration
	for _, j := range all {
		if j.State == jobs.Completed {
			res.Completed++
		} else {
			res.Problems = append(res.Problems, fmt.Sprintf("job %s %s: %s", j.ID, j.State, j.Error))
		}
		if !j.Spec.At.IsZero() && j.Started.Before(j.Spec.At) { // j.At moves on when a job is put off
			res.Early++
			res.Problems = append(res.Problems, fmt.Sprintf("job %s started at %s, due at %s", j.ID, j.Started.Format(time.RFC3339Nano), j.Spec.At.Format(time.RFC3339)))
		}
		if j.Attempts > 1 {
			res.TakenOver++
			continue
		}
		delays = append(delays, j.Late())
	}
	slices.Sort(delays)
	if n := len(delays); n > 0 {
		res.P50, res.P99, res.Max = delays[n/2], delays[min(n-1, n*99/100)], delays[n-1]
	}
	mu.Lock()
	defer mu.Unlock()
	seen := make(map[string]int, len(items))
	for _, out := range got {
		for _, it := range out {
			seen[it]++
		}
	}
	for _, it := range items {
		switch n := seen[it]; {
		case n == 0:
			res.Lost++
		case n > 1:
			res.Twice += n - 1
		}
	}
	if len(res.Problems) > 5 {
		res.Problems = append(res.Problems[:5], fmt.Sprintf("and %d more", len(res.Problems)-5))
	}
}

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// benchJobsControl measures a restore job's control at the grain of a
// record, on a directory and on S3 (versitygw, else gofakes3): how long a
// pause takes to take effect on a job paced at 2 items/s and how many
// records are delivered meanwhile; how long a runner's graceful stop takes
// to hand its job to a peer; how late a job created now starts with an idle
// runner, for each poll interval; and what an idle runner and a running job
// cost in S3 requests.
//
//	go run ./cmd/dlqdump-bench jobs-control -runs 5 -polls 1s,500ms,250ms,100ms
func benchJobsControl(args []string) error {
	fl := flag.NewFlagSet("jobs-control", flag.ExitOnError)
	runs := fl.Int("runs", 5, "measurements of each figure")
	stores := fl.String("stores", "fs,s3", "fs, s3 (versitygw when it can be started, else gofakes3)")
	polls := fl.String("polls", "1s,500ms,250ms,100ms", "the runners' PollInterval for the start delays, comma-separated")
	_ = fl.Parse(args)
	var intervals []time.Duration
	for _, s := range strings.Split(*polls, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return fmt.Errorf("-polls %q: want durations", *polls)
		}
		intervals = append(intervals, d)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tfigure\tp50\tmax\tnote\t")
	for _, name := range strings.Split(*stores, ",") {
		b, err := newControlBench(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		rows, err := b.all(*runs, intervals)
		b.close()
		if err != nil {
			return err
		}
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", b.name, r.figure, r.p50, r.max, r.note)
		}
		_ = tw.Flush()
	}
	return tw.Flush()
}

// controlBench is a store the control figures are measured on.
type controlBench struct {
	name    string
	st      drainers.Store
	rd      sink.Reader     // the runners'
	counter *s3test.Counter // their requests on S3, nil on a directory
	close   func()
}

func newControlBench(store string) (*controlBench, error) {
	switch store {
	case "fs":
		dir, err := os.MkdirTemp("", "dlqdump-bench-control-")
		if err != nil {
			return nil, err
		}
		return &controlBench{name: "directory", st: drainers.Store{Dir: dir}, rd: &fs.Reader{Directory: dir}, close: func() { os.RemoveAll(dir) }}, nil
	case "s3":
		srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-bench"})
		if err != nil {
			if srv, stop, err = s3test.NewFake(nil); err != nil {
				return nil, err
			}
		}
		c := &s3test.Counter{}
		client := srv.Client(func(o *awss3.Options) {
			o.HTTPClient = c.Wrap(&http.Client{Transport: http.DefaultTransport, Timeout: time.Minute})
		})
		prefix := s3test.UniquePrefix("bench-control")
		return &controlBench{name: srv.Name, st: drainers.Store{S3: srv, Prefix: prefix}, counter: c,
			rd: &s3.Reader{Client: client, Bucket: srv.Bucket, Prefix: prefix}, close: stop}, nil
	}
	return nil, fmt.Errorf("-stores: unknown store %q", store)
}

type controlRow struct {
	figure, p50, max, note string
}

// all measures every figure.
func (b *controlBench) all(runs int, polls []time.Duration) ([]controlRow, error) {
	ctx := context.Background()
	var rows []controlRow
	pause, during, err := b.pauses(ctx, runs)
	if err != nil {
		return nil, err
	}
	rows = append(rows, durRow("pause at 2 items/s: request to paused", pause, fmt.Sprintf("records delivered after the request: at most %d", slices.Max(during))))
	hand, err := b.handovers(ctx, runs)
	if err != nil {
		return nil, err
	}
	rows = append(rows, durRow("graceful stop: Close to the peer running the job (default PollInterval)", hand, ""))
	for _, poll := range polls {
		starts, perSecond, err := b.starts(ctx, runs, poll)
		if err != nil {
			return nil, err
		}
		note := "idle runner: no requests (a stat of the due markers every 20 ms)"
		if b.counter != nil {
			note = fmt.Sprintf("idle runner: %.1f requests/s (%s), %.0f a day", perSecond, "a listing of the due markers", perSecond*86400)
		}
		rows = append(rows, durRow(fmt.Sprintf("job created now to started, idle runner, PollInterval %s", poll), starts, note))
	}
	if b.counter != nil {
		perSecond, err := b.runningCost(ctx)
		if err != nil {
			return nil, err
		}
		rows = append(rows, controlRow{figure: "a running job's own requests (its record, ProgressInterval 500ms)", p50: fmt.Sprintf("%.1f/s", perSecond), max: "-", note: "besides its segments' checkpoints"})
	}
	return rows, nil
}

func durRow(figure string, ds []time.Duration, note string) controlRow {
	slices.Sort(ds)
	return controlRow{figure: figure, p50: ds[len(ds)/2].Round(time.Millisecond).String(), max: ds[len(ds)-1].Round(time.Millisecond).String(), note: note}
}

// counted is a destination counting what it accepts.
type counted struct{ n atomic.Uint64 }

func (c *counted) Enqueue(any) error { c.n.Add(1); return nil }

// runner returns a started runner of one Restorer over b's store, into d.
func (b *controlBench) runner(owner string, d *counted, poll time.Duration) (*jobs.Store, *jobs.Runner, func(), error) {
	js, err := jobs.Open(b.rd)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: b.rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: d, Owner: owner})
	if err != nil {
		return nil, nil, nil, err
	}
	o := &jobs.RunnerOptions{Owner: owner, PollInterval: poll}
	if os.Getenv("DLQDUMP_BENCH_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, o)
	if err != nil {
		_ = r.Close()
		return nil, nil, nil, err
	}
	if err := rn.Start(); err != nil {
		return nil, nil, nil, err
	}
	return js, rn, func() { _ = rn.Close(); _ = r.Close() }, nil
}

// segment seeds one segment of n records and returns its name.
func (b *controlBench) segment(ctx context.Context, n int) (string, error) {
	before := map[string]bool{}
	for name, err := range sink.Names(ctx, b.rd, sink.AreaReady) {
		if err != nil {
			return "", err
		}
		before[name] = true
	}
	if _, err := drainers.Seed(ctx, b.st.Reader(), 1, n); err != nil {
		return "", err
	}
	for name, err := range sink.Names(ctx, b.rd, sink.AreaReady) {
		if err != nil {
			return "", err
		}
		if !before[name] {
			return name, nil
		}
	}
	return "", fmt.Errorf("the segment seeded is not listed")
}

// waitJob reads job id every 5 ms until cond holds, and returns when.
func waitJob(ctx context.Context, js *jobs.Store, id string, cond func(*jobs.Job) bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		j, err := js.Get(ctx, id)
		if err == nil && cond(&j) {
			return time.Now(), nil
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("job %s: %w (last %s, %v)", id, ctx.Err(), j.State, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pauses measures, runs times, a pause of a job at 2 items/s: from the
// request to the record saying paused, and the records delivered after the
// request.
func (b *controlBench) pauses(ctx context.Context, runs int) ([]time.Duration, []int, error) {
	name, err := b.segment(ctx, 1000)
	if err != nil {
		return nil, nil, err
	}
	d := &counted{}
	js, _, stop, err := b.runner("pause-runner", d, 0)
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	ctl, err := jobs.Open(b.st.Reader())
	if err != nil {
		return nil, nil, err
	}
	id := fmt.Sprintf("pause-%d", time.Now().UnixNano())
	if _, err := js.Create(ctx, jobs.Spec{ID: id, Rate: 2, Segments: []string{name}}); err != nil {
		return nil, nil, err
	}
	var took []time.Duration
	var during []int
	for range runs {
		if _, err := waitJob(ctx, ctl, id, func(j *jobs.Job) bool { return j.State == jobs.Running }); err != nil {
			return nil, nil, err
		}
		from := d.n.Load()
		for d.n.Load() < from+2 { // delivering
			time.Sleep(5 * time.Millisecond)
		}
		at := d.n.Load()
		start := time.Now()
		if _, err := ctl.Pause(ctx, id); err != nil {
			return nil, nil, err
		}
		end, err := waitJob(ctx, ctl, id, func(j *jobs.Job) bool { return j.State == jobs.Paused })
		if err != nil {
			return nil, nil, err
		}
		took = append(took, end.Sub(start))
		during = append(during, int(d.n.Load()-at))
		if _, err := ctl.Resume(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	_, _ = ctl.Cancel(ctx, id)
	return took, during, nil
}

// handovers measures, runs times, a graceful stop: from runner A's Close
// to runner B running the job A ran.
func (b *controlBench) handovers(ctx context.Context, runs int) ([]time.Duration, error) {
	name, err := b.segment(ctx, 5000)
	if err != nil {
		return nil, err
	}
	ctl, err := jobs.Open(b.st.Reader())
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("hand-%d", time.Now().UnixNano())
	d := &counted{}
	var took []time.Duration
	stops := map[string]func(){}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	owners := []string{"hand-a", "hand-b"}
	for _, o := range owners {
		_, _, stop, err := b.runner(o, d, 0) // the default PollInterval
		if err != nil {
			return nil, err
		}
		stops[o] = stop
	}
	if _, err := ctl.Create(ctx, jobs.Spec{ID: id, Rate: 20, Segments: []string{name}}); err != nil {
		return nil, err
	}
	for i := range runs {
		var holder string
		if _, err := waitJob(ctx, ctl, id, func(j *jobs.Job) bool {
			holder = j.Runner
			return j.State == jobs.Running && stops[j.Runner] != nil
		}); err != nil {
			return nil, err
		}
		start := time.Now()
		stops[holder]()
		delete(stops, holder)
		end, err := waitJob(ctx, ctl, id, func(j *jobs.Job) bool { return j.State == jobs.Running && j.Runner != holder })
		if err != nil {
			return nil, err
		}
		took = append(took, end.Sub(start))
		// A runner in its place, for the next hand-over.
		o := fmt.Sprintf("hand-%d", i+len(owners))
		_, _, stop, err := b.runner(o, d, 0)
		if err != nil {
			return nil, err
		}
		stops[o] = stop
	}
	_, _ = ctl.Cancel(ctx, id)
	return took, nil
}

// starts measures, runs times, how late a job created due now starts with
// an idle runner polling every poll, and what the idle runner costs in
// requests a second on S3.
func (b *controlBench) starts(ctx context.Context, runs int, poll time.Duration) ([]time.Duration, float64, error) {
	d := &counted{}
	_, _, stop, err := b.runner("start-runner", d, poll)
	if err != nil {
		return nil, 0, err
	}
	defer stop()
	ctl, err := jobs.Open(b.st.Reader())
	if err != nil {
		return nil, 0, err
	}
	var perSecond float64
	if b.counter != nil {
		time.Sleep(2 * time.Second) // settled
		before := b.counter.Counts()
		time.Sleep(5 * time.Second)
		perSecond = float64(b.counter.Counts().Sub(before).Total()) / 5
	}
	var took []time.Duration
	for i := range runs {
		name, err := b.segment(ctx, 5)
		if err != nil {
			return nil, 0, err
		}
		id := fmt.Sprintf("start-%s-%d-%d", strings.ReplaceAll(poll.String(), ".", "_"), i, time.Now().UnixNano())
		// Created just after a second begins, due at it: the delay is
		// the runner's to notice, not the rounding of a due time.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)) + 5*time.Millisecond)
		created := time.Now()
		if _, err := ctl.Create(ctx, jobs.Spec{ID: id, At: created.Truncate(time.Second), Segments: []string{name}}); err != nil {
			return nil, 0, err
		}
		var started time.Time
		if _, err := waitJob(ctx, ctl, id, func(j *jobs.Job) bool { started = j.Started; return !j.Started.IsZero() }); err != nil {
			return nil, 0, err
		}
		took = append(took, started.Sub(created))
	}
	return took, perSecond, nil
}

// runningCost returns the requests a second of a running job's own record
// on S3: a job at 2 items/s over a segment of one block writes no
// checkpoint while it delivers, so what is counted is its progress and its
// claim's renewals.
func (b *controlBench) runningCost(ctx context.Context) (float64, error) {
	name, err := b.segment(ctx, 1000)
	if err != nil {
		return 0, err
	}
	d := &counted{}
	_, _, stop, err := b.runner("cost-runner", d, time.Hour)
	if err != nil {
		return 0, err
	}
	defer stop()
	ctl, err := jobs.Open(b.st.Reader())
	if err != nil {
		return 0, err
	}
	id := fmt.Sprintf("cost-%d", time.Now().UnixNano())
	if _, err := ctl.Create(ctx, jobs.Spec{ID: id, Rate: 2, Segments: []string{name}}); err != nil {
		return 0, err
	}
	if _, err := waitJob(ctx, ctl, id, func(j *jobs.Job) bool { return j.Delivered > 0 }); err != nil {
		return 0, err
	}
	before := b.counter.Counts()
	time.Sleep(10 * time.Second)
	c := b.counter.Counts().Sub(before)
	fmt.Fprintf(os.Stderr, "%s: a running job's requests a second: %s\n", b.name, c.Per(10))
	_, _ = ctl.Cancel(ctx, id)
	return float64(c.Total()) / 10, nil
}

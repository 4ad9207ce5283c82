package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/koykov/queue"
	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/jobs"
)

func newJobCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Restore jobs: scheduled restores that outlive processes, run by any runner",
		Long: `A restore job is a record in the dump's store (DIR/.tables/jobs/ or
PREFIX.tables/jobs/): what to restore (the filters of restore), where (a
destination name), how fast (--rate items/s) and when (--at, to the second,
and --window). Any number of runners (dlqdump job run, or a program's
jobs.Runner) run the due jobs, each job once: a runner claims a job like a
restorer claims a segment, records its progress at least twice a second,
and a job whose runner died is taken over from there. Pause, resume and
cancel work from any process, and take effect at the job's next record
within about a second, whatever its rate; a runner stopped gracefully hands
its jobs over to the others.

A selective job reads only to select: the records it does not select stay in
their segments (nothing is copied), so many jobs over one store rewrite none
of it.`,
	}
	cmd.AddCommand(newJobCreateCmd(a), newJobLsCmd(a), newJobShowCmd(a), newJobControlCmd(a, "pause"), newJobControlCmd(a, "resume"),
		newJobControlCmd(a, "cancel"), newJobWaitCmd(a), newJobRunCmd(a))
	return cmd
}

// jobStore opens the jobs of a location.
func (a *app) jobStore(loc string) (*jobs.Store, error) {
	_, st, err := a.jobStoreAt(loc)
	return st, err
}

// jobStoreAt opens a location and its jobs.
func (a *app) jobStoreAt(loc string) (*location, *jobs.Store, error) {
	l, err := a.open(loc, true)
	if err != nil {
		return nil, nil, err
	}
	st, err := jobs.Open(l.reader)
	return l, st, err
}

func newJobCreateCmd(a *app) *cobra.Command {
	var (
		id, at, dest, area, tz string
		windows                []string
		limit                  uint64
		rate                   float64
		asJSON                 bool
		ff                     filterFlags
		jq                     jqFlags
	)
	cmd := &cobra.Command{
		Use:   "create LOCATION",
		Short: "Create a restore job; print its ID (--json: the job)",
		Example: `  dlqdump job create /var/lib/app/dlq --where reason=failed --rate 200 --at 2026-11-28T03:00:00Z
  dlqdump job create s3://dead-letters/orders/ --id redrive-incident-42 --since 2h --dest orders --json
  dlqdump job create /var/lib/app/dlq --area quarantine --window 01:00-05:00 --tz Europe/Berlin
  dlqdump job create /var/lib/app/dlq --select 'payload ~ "ord-0777777"' --dest orders
  dlqdump job create /var/lib/app/dlq --select 'error like "missing currency"' --jq '.payload.currency //= "EUR"'`,
		Args: argsRange(1, 1, "LOCATION"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			flt, err := ff.parse(now)
			if err != nil {
				return err
			}
			if _, err := jq.compile(); err != nil {
				return err
			}
			spec := jobs.Spec{ID: id, Windows: windows, TimeZone: tz, Since: flt.since, Until: flt.until, Where: flt.where, Select: flt.expr.String(),
				JQ: jq.expr, JQKeepLayout: jq.keep, Limit: limit, Rate: rate, Destination: dest, Area: area}
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErrorf("--at %q: want an RFC 3339 time, e.g. 2026-11-28T03:00:00Z", at)
				}
				spec.At = t
			}
			l, st, err := a.jobStoreAt(args[0])
			if err != nil {
				return err
			}
			j, err := st.Create(a.ctx, spec)
			if errors.Is(err, dlqdump.ErrConfig) {
				return usageErrorf("%v", err)
			}
			if err != nil {
				return err
			}
			a.logChange(l, changelog.ActionJobCreate, "job "+j.ID, j.Spec.Describe()+", due "+j.At.UTC().Format(time.RFC3339), nil)
			if asJSON {
				return a.printJob(&j)
			}
			a.printOut(j.ID)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&id, "id", "", "the job's ID (default: a random one); creating it again with the same flags is no error")
	fl.StringVar(&at, "at", "", "when the job is due, RFC 3339, to the second (default: now)")
	fl.StringArrayVar(&windows, "window", nil, "run only inside this daily window, HH:MM-HH:MM (repeatable)")
	fl.StringVar(&tz, "tz", "", "the IANA time zone of --window (default UTC)")
	fl.Uint64Var(&limit, "limit", 0, "end the job after this many records delivered or quarantined (0: none)")
	fl.Float64Var(&rate, "rate", 0, "items per second at most, for this job (0: the runner's pace)")
	fl.StringVar(&dest, "dest", "", "the destination name a runner must serve (default: a runner's own, \"\")")
	fl.StringVar(&area, "area", "ready", "ready, or quarantine: release and replay quarantined segments")
	fl.BoolVar(&asJSON, "json", false, "print the job as one JSON object")
	fl.StringVar(&ff.since, "since", "", "only records that entered the dump at or after this time: RFC 3339, a date, or a duration ago (90m, 1h, 7d)")
	fl.StringVar(&ff.until, "until", "", "only records that entered the dump before this time (same forms as --since)")
	fl.StringArrayVar(&ff.where, "where", nil, "only records whose header KEY has VALUE, as KEY=VALUE (repeatable: all must match)")
	fl.StringVar(&ff.sel, "select", "", `only the records this expression selects (docs/SELECT.md), e.g. '$.order.id = "ord-7"'; relative times (now-2h) are fixed when the job is created`)
	jq.register(fl, false)
	return cmd
}

func newJobLsCmd(a *app) *cobra.Command {
	var state string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls LOCATION",
		Short: "List restore jobs (--json: JSON lines)",
		Args:  argsRange(1, 1, "LOCATION"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var states []jobs.State
			if state != "" {
				s, err := jobs.ParseState(state)
				if err != nil {
					names := make([]string, len(jobs.States))
					for i, s := range jobs.States {
						names[i] = string(s)
					}
					return usageErrorf("--state %q: no such job state; want one of %s", state, strings.Join(names, ", "))
				}
				states = append(states, s)
			}
			st, err := a.jobStore(args[0])
			if err != nil {
				return err
			}
			var rows [][]string
			for j, err := range st.List(a.ctx, states...) {
				if err != nil {
					a.warnf("job %s: %v", j.ID, err)
					continue
				}
				if asJSON {
					if err := a.printJob(&j); err != nil {
						return err
					}
					continue
				}
				rate := ""
				if j.State == jobs.Running {
					rate = fmt.Sprintf("%.1f/s", j.Velocity)
				}
				left := ""
				if j.Left > 0 {
					left = fmt.Sprint(j.Left)
				}
				rows = append(rows, []string{j.ID, string(j.State), fmtTime(j.At), fmt.Sprint(j.Delivered), fmt.Sprint(j.Quarantined), left, rate, fmtTime(j.Finished), j.Runner})
			}
			if !asJSON {
				t := newTable(3, 4, 5, 6)
				t.add("ID", "STATE", "AT", "DELIVERED", "QUARANTINED", "LEFT", "RATE", "FINISHED", "RUNNER")
				for _, r := range rows {
					t.add(r...)
				}
				return t.write(a.stdout)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&state, "state", "", "only jobs in this state: pending, running, paused, completed, failed or cancelled")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func newJobShowCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show LOCATION ID",
		Short: "Show a job: state, progress, how late it started, its runner, its last error",
		Args:  argsRange(2, 2, "LOCATION ID"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			st, err := a.jobStore(args[0])
			if err != nil {
				return err
			}
			j, err := st.Get(a.ctx, args[1])
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJob(&j)
			}
			return a.showJob(st, &j)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the job as one JSON object")
	return cmd
}

// showJob prints a job for people, with why it waits when it is due and
// not started.
func (a *app) showJob(st *jobs.Store, j *jobs.Job) error {
	t := newTable()
	t.add("id", j.ID)
	t.add("state", string(j.State))
	if j.Request != "" {
		t.add("request", j.Request+" (at the job's next record, once its runner learns of it)")
	}
	if j.Refused != "" {
		t.add("refused", j.Refused)
	}
	t.add("due", fmtTime(j.At))
	if !j.Next.IsZero() && (j.State == jobs.Pending || j.State == jobs.Running) {
		t.add("next", fmtTime(j.Next)+" (tried again, its window's next opening, resumed or handed over)")
	}
	if !j.Started.IsZero() {
		t.add("started", fmt.Sprintf("%s (%s late)", fmtTime(j.Started), j.Late().Round(time.Millisecond)))
	}
	if !j.Finished.IsZero() {
		t.add("finished", fmtTime(j.Finished))
	}
	t.add("delivered", fmt.Sprint(j.Delivered))
	t.add("quarantined", fmt.Sprint(j.Quarantined))
	if j.Left > 0 {
		t.add("left", fmt.Sprintf("about %d", j.Left))
	}
	if j.State == jobs.Running && !j.Progressed.IsZero() {
		t.add("rate", fmt.Sprintf("%.1f records/s (written %s)", j.Velocity, fmtTime(j.Progressed)))
	}
	if len(j.Releasing) > 0 {
		t.add("releasing", strings.Join(j.Releasing, ", ")+" (released from quarantine, restored first by whoever runs it)")
	}
	if j.Attempts > 0 {
		t.add("passes", fmt.Sprint(j.Attempts))
	}
	if j.Failures > 0 {
		failAfter := j.Spec.FailAfter
		if failAfter <= 0 {
			failAfter = jobs.DefaultFailAfter
		}
		t.add("failures", fmt.Sprintf("%d in a row, failing since %s (it fails after %s without progress)", j.Failures, fmtTime(j.FailingSince), failAfter))
	}
	if j.Runner != "" {
		t.add("runner", j.Runner)
	}
	if j.Error != "" {
		t.add("error", j.Error)
	}
	dest := j.Spec.Destination
	t.add("destination", fmt.Sprintf("%q", dest))
	if j.Spec.JQ != "" {
		t.add("jq", j.Spec.JQ)
		if j.Spec.JQKeepLayout {
			t.add("jq layout", "kept (--jq-keep-layout)")
		}
	}
	if w := a.waiting(st, j); w != "" {
		t.add("waiting", w)
	}
	return t.write(a.stdout)
}

// waiting says why a due job has not started (see inspect.JobWaiting).
func (a *app) waiting(st *jobs.Store, j *jobs.Job) string {
	return inspect.JobWaiting(a.ctx, st, j)
}

func newJobControlCmd(a *app, verb string) *cobra.Command {
	short := map[string]string{
		"pause":  "Pause a job (a running one at its next record, within about a second)",
		"resume": "Resume a paused or failed job",
		"cancel": "Cancel a job; what it did not deliver stays where it is",
	}[verb]
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   verb + " LOCATION ID",
		Short: short,
		Args:  argsRange(2, 2, "LOCATION ID"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			l, st, err := a.jobStoreAt(args[0])
			if err != nil {
				return err
			}
			action := "job." + verb
			if verb == "resume" {
				if before, err := st.Get(a.ctx, args[1]); err == nil && before.State == jobs.Failed {
					action = changelog.ActionJobRetry
				}
			}
			var j jobs.Job
			switch verb {
			case "pause":
				j, err = st.Pause(a.ctx, args[1])
			case "resume":
				j, err = st.Resume(a.ctx, args[1])
			default:
				j, err = st.Cancel(a.ctx, args[1])
			}
			if err != nil {
				return err
			}
			result := string(j.State)
			if j.Request != "" {
				result += ", " + string(j.Request) + " requested"
			}
			a.logChange(l, action, "job "+j.ID, result, nil)
			if j.Request != "" && wait > 0 {
				j = a.answer(st, j, wait)
			}
			return a.printAnswer(&j, wait)
		}),
	}
	if verb != "resume" {
		durationVar(cmd.Flags(), &wait, "wait", 5*time.Second, "wait this long at most for a running job's runner to act on the request, and say what it did (0: return at once)")
	}
	return cmd
}

// answer waits, for at most wait, until the runner of job j acts on its
// request, and returns the job then.
func (a *app) answer(st *jobs.Store, j jobs.Job, wait time.Duration) jobs.Job {
	ctx, cancel := context.WithTimeout(a.soft, wait)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for j.Request != "" {
		select {
		case <-ctx.Done():
			return j
		case <-t.C:
		}
		cur, err := st.Get(ctx, j.ID)
		if err != nil {
			return j
		}
		j = cur
	}
	return j
}

// printAnswer says what became of a request: acted on, refused (an error:
// the job had ended), withdrawn, or still waiting for the job's runner.
func (a *app) printAnswer(j *jobs.Job, waited time.Duration) error {
	switch {
	case j.Request != "" && waited > 0:
		a.printOut(fmt.Sprintf("%s: %s, %s requested; its runner has not acted on it within %s (one that stopped acts on it when another runner takes the job over)", j.ID, j.State, j.Request, waited))
	case j.Request != "":
		a.printOut(fmt.Sprintf("%s: %s, %s requested (at the job's next record, once its runner learns of it)", j.ID, j.State, j.Request))
	case j.Refused != "":
		a.printOut(fmt.Sprintf("%s: %s", j.ID, j.State))
		return fmt.Errorf("job %s: refused %s", j.ID, j.Refused)
	default:
		a.printOut(fmt.Sprintf("%s: %s", j.ID, j.State))
	}
	return nil
}

func newJobWaitCmd(a *app) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait LOCATION ID",
		Short: "Wait until a job ends; exit 0 if it completed, 1 if it failed, was cancelled or the wait timed out",
		Args:  argsRange(2, 2, "LOCATION ID"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			st, err := a.jobStore(args[0])
			if err != nil {
				return err
			}
			ctx := a.soft
			if timeout > 0 {
				var cancel func()
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			j, err := st.Wait(ctx, args[1], 500*time.Millisecond)
			if err != nil && !j.State.Final() {
				return fmt.Errorf("job %s is %s after the wait: %w", args[1], j.State, err)
			}
			a.printOut(fmt.Sprintf("%s: %s, %d delivered, %d quarantined", j.ID, j.State, j.Delivered, j.Quarantined))
			if j.State != jobs.Completed {
				if j.Error == "" {
					return fmt.Errorf("job %s ended %s", j.ID, j.State)
				}
				return fmt.Errorf("job %s ended %s: %s", j.ID, j.State, j.Error)
			}
			return nil
		}),
	}
	durationVar(cmd.Flags(), &timeout, "timeout", 0, "give up after this long (0: wait until it ends or an interrupt)")
	return cmd
}

func newJobRunCmd(a *app) *cobra.Command {
	var (
		f           restoreFlags
		owner       string
		dests       []string
		concurrency int
		poll        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run LOCATION --to URL",
		Short: "Run due restore jobs into an HTTP endpoint until interrupted",
		Long: `Run the due jobs of a dump, as many at once as --jobs, POSTing their records
to --to as restore --to does, until SIGINT or SIGTERM, which stops each job at
the record being delivered and hands it over: pending again, due at once, for
any runner. Jobs whose destination is "" (the default) are taken, and those
named by --dest (--dest NAME=URL delivers those into URL instead: an
http:// or https:// endpoint, or, in the dlqdump built by the brokers module,
nats://HOST:PORT/SUBJECT or kafka://HOST:PORT/TOPIC as for restore). Every job's start, end, pause, cancel, hand-over and failure
is logged on stderr with its counts.`,
		Example: `  dlqdump job run /var/lib/app/dlq --to http://orders.internal:8080/redrive
  dlqdump job run s3://dead-letters/orders/ --to http://localhost:8080/in --dest orders --owner replica-2`,
		Args: argsRange(1, 1, "LOCATION"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.jobRun(args[0], &f, owner, dests, concurrency, poll)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.to, "to", "", "deliver each record to this URL: "+strings.Join(destForms(), ", ")+" (required)")
	fl.StringVar(&owner, "owner", "", "the runner's label in jobs and logs (default: host, process and a random number)")
	fl.StringArrayVar(&dests, "dest", nil, "serve jobs of this destination name too, into --to, or NAME=URL: into URL (repeatable)")
	fl.IntVar(&concurrency, "jobs", 4, "jobs run at once")
	durationVar(fl, &poll, "poll", 500*time.Millisecond, "list the due jobs this often: on S3 a request each time (a job created now, or handed over by a runner that stopped, starts within it; on a directory an idle runner notices new jobs within 20 ms anyway)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 5, "attempts per record while the endpoint is unavailable")
	fl.IntVar(&f.concurrency, "concurrency", 4, "deliveries in flight at once, per job: POSTs or publishes")
	durationVar(fl, &f.retryBase, "retry-base", 100*time.Millisecond, "first backoff bound between attempts")
	durationVar(fl, &f.retryMax, "retry-max", 10*time.Second, "largest backoff bound between attempts")
	durationVar(fl, &f.timeout, "timeout", 30*time.Second, "time limit of one HTTP request, or of a publish and its acknowledgement")
	fl.StringVar(&f.contentType, "content-type", "application/octet-stream", "Content-Type of the POSTed payloads")
	durationVar(fl, &f.lease, "lease", 30*time.Second, "claim lease on jobs and segments, renewed every third of it")
	_ = fl.MarkHidden("lease")
	return cmd
}

func (a *app) jobRun(loc string, f *restoreFlags, owner string, dests []string, n int, poll time.Duration) error {
	switch {
	case poll < 10*time.Millisecond:
		return usageErrorf("--poll %s: want at least 10ms", poll)
	case f.to == "":
		return usageErrorf("--to URL is required")
	case n < 1 || n > 256:
		return usageErrorf("--jobs %d: want 1 to 256", n)
	case f.concurrency < 1 || f.concurrency > maxConcurrency:
		return usageErrorf("--concurrency %d: want 1 to %d", f.concurrency, maxConcurrency)
	case f.lease < time.Second:
		return usageErrorf("--lease %s: want at least 1s", f.lease)
	}
	target, err := parseTo(fmt.Sprintf("--to %q", f.to), f.to)
	if err != nil {
		return err
	}
	named, err := parseNamedDests(dests, target)
	if err != nil {
		return err
	}
	l, err := a.open(loc, true)
	if err != nil {
		return err
	}
	st, err := jobs.Open(l.reader)
	if err != nil {
		return err
	}
	ids, err := a.identities()
	if err != nil {
		return err
	}
	if owner == "" {
		owner = cliOwner()
	}
	open := newJobDests(a, f)
	defer open.close()
	var restorers []*dlqdump.Restorer
	for range n {
		hd, err := open.dest(target)
		if err != nil {
			return err
		}
		dests := map[string]queue.Enqueuer{}
		for name, u := range named {
			if dests[name], err = open.dest(u); err != nil {
				return err
			}
		}
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: l.reader, Decoder: decoder.Fallthrough{}, Queue: hd, Destinations: dests,
			DeliverEnvelope: true, MaxAttempts: 1, Concurrency: f.concurrency, AllowRate: 1, Lease: f.lease, Logger: a.logger(), MaxRecordSize: a.recordSize.size,
			Owner: owner, VersionCompatible: func(_, _ dlqdump.Version) bool { return true }, Encryption: &dlqdump.Encryption{Identities: ids}})
		if err != nil {
			return err
		}
		defer r.Close()
		restorers = append(restorers, r)
	}
	rn, err := jobs.NewRunner(st, restorers, &jobs.RunnerOptions{Owner: owner, Lease: f.lease, PollInterval: poll, Logger: a.eventLogger()})
	if err != nil {
		return err
	}
	if err := rn.Start(); err != nil {
		return err
	}
	a.infof("running the due jobs of %s as %q, %d at once, into %s; interrupt to stop", l, owner, n, f.to)
	<-a.soft.Done()
	if err := rn.Close(); err != nil {
		return err
	}
	a.infof("stopped; a job this runner was running is pending again, for any runner")
	return nil
}

// jobDest is a runner's HTTP destination: an outage trips it for the pass
// that met it (which stops there, its job tried again later), not for the
// passes after it.
type jobDest struct {
	mu  sync.Mutex
	cur *httpDest
	mk  func() *httpDest
}

func (j *jobDest) Enqueue(x any) error {
	j.mu.Lock()
	if j.cur == nil || j.cur.tripped() {
		j.cur = j.mk()
	}
	d := j.cur
	j.mu.Unlock()
	return d.Enqueue(x)
}

// printJob prints a job as one JSON object on a line.
func (a *app) printJob(j *jobs.Job) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	a.printOut(string(b))
	return nil
}

// Command demo is dlqdump's demo scene: a real github.com/koykov/queue with
// producers and workers, whose DLQ is a dlqdump dumper, and a Restorer
// feeding the dump back into the queue when it has room — with a live
// dashboard, an HTTP API and a headless scenario mode.
//
//	go run ./demo                                   # dashboard on http://127.0.0.1:8080/
//	go run ./demo -scenario burst -duration 60s     # scripted load, summary table, exit status
//	go run ./demo -dir DIR -scenario restore        # put back what a run left in DIR, dump nothing new
//
// # The scene
//
// Producers generate tasks (-producers of them, -rate tasks per second each)
// into a koykov queue of -capacity items worked by -workers workers. A
// worker spends about -worker-delay on a task and fails with probability
// -fail-rate; a failed task is retried up to -max-retries times after an
// exponential backoff with full jitter (-backoff-base, -backoff-max): koykov's
// own MaxRetries re-enqueues at once, so the demo sets it to 0 and schedules
// the retries itself (a heap and one timer), and the last failure reaches the
// DLQ through koykov's FailToDLQ. The queue's DLQ is the dumper, which writes
// segments into -dir or an S3 prefix (-s3 s3://bucket/prefix); by default
// into a new temporary directory, removed at exit when it holds no segment
// and otherwise kept (the exit message says where, and how to restore or
// remove it). A task
// reaches the dump when the queue is full ("leak"), when it waited in the
// queue longer than -deadline ("deadline"), or when its retries are
// exhausted ("failed"); the reason, the attempts and the last error are
// stored as headers beside it (the task implements dlqdump.HeaderCarrier).
// A Restorer looks for ready segments every -restore-interval and puts the
// tasks back into the queue while its fill rate is at most -allow-rate. A
// task dumped and restored -max-replays times is quarantined instead.
//
// Without -scenario the load comes in waves (-waves, on by default): calm
// with -producers for -wave-calm (20s), then a burst of -burst-producers
// (default 4x) for -wave-burst (8s), again and again. The default scene's
// workers take about 800 tasks a second; a burst brings 1200, so the queue
// fills and overflows into the dump ("leak", and "deadline" for tasks that
// waited too long), and the Restorer puts the dump back during the calm.
// Changing the producers by hand (the dashboard, the API) ends the waves.
//
// Every few seconds (-log-every) the command prints one line: producers,
// queue fill, tasks per second produced, processed, leaked, dumped and
// restored, the dump's pending bytes and the segments ready.
//
// # Shutdown
//
// On SIGINT or SIGTERM the demo stops taking tasks (POST /enqueue answers
// 503, the producers and the Restorer stop), lets the workers finish what
// was accepted for at most -shutdown-timeout, closes the queue and the
// dumper, and prints where every accepted task ended:
//
//	tasks: 1500 accepted + 0 found in the dump = 262 processed + 1238 in the dump + 0 quarantined + 0 lost + 0 still in the queue
//	OK: every accepted task was processed or is in the dump
//
// When the timeout ends first, or on a second signal, the workers stop
// processing: what is still queued, running or waiting for a retry goes
// to the dump with reason "shutdown" (an attempt in progress is abandoned,
// and run again after a restore). A third signal exits at once. The exit
// status is 1 when the counts do not add up or a task is lost.
//
// # HTTP
//
// The dashboard (GET /) is served from files embedded in the binary; it
// needs no network. It charts the queue's fill, the tasks per second, the
// dump's pending bytes and ready segments, lists the newest segments and
// has buttons to add or remove producers, flush the dump and start a
// restore pass. The API:
//
//	POST /enqueue                 {"id","payload","max_retries"} -> 202 {"id","status"}; 400 bad JSON or
//	                              fields; 409 duplicate id; 503 the queue refused it (closed, no scene)
//	GET  /healthz                 200 {"status":"ok"}
//	GET  /tasks/{id}              200 status (queued, running, done, failed, dumped, restored,
//	                              quarantined), reason, attempts, history; 404 unknown
//	GET  /metrics                 Prometheus: dlqdump_* (metrics/prometheus) and demo_*
//	GET  /api/v1/stats?since=MS   the dashboard's samples and totals (JSON)
//	GET  /api/v1/segments?n=10    the newest segments, ready and quarantined
//	GET  /api/v1/status           the scene: config, queue, dump, restorer
//	POST /api/v1/init             start a scene; body: JSON config over the flags, e.g.
//	                              {"capacity":1000,"workers":8,"rate":500,"fail_rate":0.1}
//	     /api/v1/producer-up?delta=N, /api/v1/producer-down?delta=N
//	     /api/v1/stop (graceful), /api/v1/force-stop   (GET or POST, as in koykov's demo)
//	POST /api/v1/restore          flush the dump and run a restore pass now (202)
//	POST /api/v1/flush            publish the dump's open segment
//
// Payloads "!fail" and "!ok" make a task always fail or always succeed;
// "!sleep=300ms" makes it take that long.
//
// # Scenarios
//
// -scenario burst runs -duration of scripted load with no HTTP server
// (unless -addr is given): calm (20% of the time, -producers producers), a
// burst that overflows the queue (20%, -burst-producers, default 4x), calm
// again while the Restorer drains the dump (60%). Then it stops the
// producers, waits (at most -drain-timeout) until nothing is queued, running,
// waiting for a retry or in the dump, stops the scene and prints a summary:
// produced, processed, leaked, dumped, restored, quarantined, and lost =
// produced - processed - quarantined, and the task ledger (where each task
// ended, by state). It exits with status 1 unless lost is 0, the ledger adds
// up and restored + quarantined = dumped. -scenario steady keeps -producers
// for the whole duration. -scenario restore runs no producers: the
// Restorer puts back what an earlier run left in -dir (or -s3), the workers
// process it, and the summary counts it as "found"; it exits with status 1
// unless every record found was restored or quarantined and nothing was
// lost. It is what the exit message of a run that left segments says to run.
//
// # Flags
//
//	-addr 127.0.0.1:8080   listen address (loopback unless told otherwise)
//	-dir DIR               segment directory; default a new temporary directory
//	-s3 s3://BUCKET/PREFIX store segments in S3 instead; with -s3-endpoint URL
//	                       (S3-compatible servers; path-style unless -s3-path-style=false),
//	                       -s3-region, -s3-access-key/-s3-secret-key (default: the AWS
//	                       environment and credential chain), -s3-spool DIR
//	-capacity 500          queue capacity
//	-workers 4             workers; -workers-max N > workers makes koykov balance them
//	-worker-delay 5ms      time a worker spends on a task
//	-fail-rate 0.2         probability that an attempt fails
//	-max-retries 2         retries after the first attempt, with backoff
//	-backoff-base 10ms, -backoff-max 500ms
//	-deadline 500ms        longest wait in the queue before the task is dumped; 0: none
//	-producers 2, -producers-max 32, -rate 150 (tasks/s per producer), -payload 200 (bytes)
//	-segment-size 1MiB, -flush 2s, -max-pending 64MiB    the dumper
//	-restore-interval 1s, -allow-rate 0.5, -postpone 50ms, -restore-rate 0 (no limit),
//	-max-replays 5, -auto-restore=true                    the Restorer
//	-waves=true, -wave-calm 20s, -wave-burst 8s, -burst-producers N (default 4x -producers)
//	-scenario NAME, -duration 60s, -drain-timeout 60s
//	-idle                  start with no scene (POST /api/v1/init starts one)
//	-shutdown-timeout 30s  on a signal: longest wait for the workers; then what is left goes to the dump
//	-log-every 5s          status line interval; 0: none
//	-keep-done 100000      finished producer tasks remembered for GET /tasks/{id}
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status. The first
// SIGINT or SIGTERM starts the shutdown, a second one makes it dump what
// the workers have not done instead of waiting, a third exits at once.
func run(args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hurry := make(chan struct{})
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		for n := 1; ; n++ {
			select {
			case <-finished:
				return
			case <-sigs:
			}
			switch n {
			case 1:
				cancel()
			case 2:
				fmt.Fprintln(stderr, "demo: second signal: what the workers have not done goes to the dump (a third signal exits at once)")
				close(hurry)
			default:
				fmt.Fprintln(stderr, "demo: third signal: exiting at once")
				os.Exit(130)
			}
		}
	}()
	return runCtx(ctx, hurry, args, stdout, stderr)
}

// runCtx is run with the signals as channels: the shutdown starts when ctx
// ends, and hurries when hurry is closed.
func runCtx(ctx context.Context, hurry <-chan struct{}, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("demo", flag.ContinueOnError)
	fset.SetOutput(stderr)
	cfg := defaultSceneConfig()
	var (
		addr        = fset.String("addr", "127.0.0.1:8080", "listen address")
		dir         = fset.String("dir", "", "segment directory (default: a new temporary directory)")
		s3o         s3Options
		scenario    = fset.String("scenario", "", "run a scripted scenario headless: burst, steady, or restore (put back what an earlier run left, dump nothing new)")
		durationF   = fset.Duration("duration", 60*time.Second, "scenario: duration of the scripted load")
		drainF      = fset.Duration("drain-timeout", 60*time.Second, "scenario: longest wait for the queue and the dump to drain")
		burstProd   = fset.Int("burst-producers", 0, "producers during a burst, in the waves and in -scenario burst (default 4x -producers)")
		wavesF      = fset.Bool("waves", true, "without -scenario: alternate calm (-producers) and bursts that overflow the queue")
		waveCalm    = fset.Duration("wave-calm", 20*time.Second, "waves: how long each calm lasts")
		waveBurst   = fset.Duration("wave-burst", 8*time.Second, "waves: how long each burst lasts")
		idle        = fset.Bool("idle", false, "start with no scene; POST /api/v1/init starts one")
		shutdownF   = fset.Duration("shutdown-timeout", 30*time.Second, "on a signal: longest wait for the workers before what is left goes to the dump")
		logEvery    = fset.Duration("log-every", 5*time.Second, "status line interval (0: none)")
		keepDone    = fset.Int("keep-done", 100_000, "finished producer tasks remembered for GET /tasks/{id}")
		workersMaxF = fset.Int("workers-max", 0, "more than -workers: koykov balances between them")
	)
	fset.StringVar(&s3o.URL, "s3", "", "store segments in S3: s3://bucket/prefix")
	fset.StringVar(&s3o.Endpoint, "s3-endpoint", "", "S3-compatible endpoint URL (default AWS, or AWS_ENDPOINT_URL)")
	fset.StringVar(&s3o.Region, "s3-region", "", "S3 region (default AWS_REGION, else us-east-1)")
	fset.StringVar(&s3o.AccessKey, "s3-access-key", "", "S3 access key (default: the AWS credential chain)")
	fset.StringVar(&s3o.SecretKey, "s3-secret-key", "", "S3 secret key")
	fset.StringVar(&s3o.SpoolDir, "s3-spool", "", "local directory for segments waiting for upload (default memory)")
	pathStyle := fset.Bool("s3-path-style", false, "path-style S3 addressing (default on with -s3-endpoint)")

	fset.IntVar(&cfg.Capacity, "capacity", cfg.Capacity, "queue capacity")
	fset.IntVar(&cfg.Workers, "workers", cfg.Workers, "workers")
	fset.Var(&cfg.WorkerDelay, "worker-delay", "time a worker spends on a task")
	fset.Float64Var(&cfg.FailRate, "fail-rate", cfg.FailRate, "probability that an attempt fails")
	fset.IntVar(&cfg.MaxRetries, "max-retries", cfg.MaxRetries, "retries after the first attempt")
	fset.Var(&cfg.BackoffBase, "backoff-base", "first retry delay bound (exponential, full jitter)")
	fset.Var(&cfg.BackoffMax, "backoff-max", "largest retry delay bound")
	fset.Var(&cfg.Deadline, "deadline", "longest wait in the queue before the task is dumped (0: none)")
	fset.IntVar(&cfg.Producers, "producers", cfg.Producers, "producers at start")
	fset.IntVar(&cfg.ProducersMax, "producers-max", cfg.ProducersMax, "most producers")
	fset.Float64Var(&cfg.Rate, "rate", cfg.Rate, "tasks per second per producer")
	fset.IntVar(&cfg.PayloadSize, "payload", cfg.PayloadSize, "bytes of generated payload")
	fset.Var(&cfg.SegmentSize, "segment-size", "largest segment (dlqdump Capacity)")
	fset.Var(&cfg.Flush, "flush", "dump FlushInterval")
	fset.Var(&cfg.MaxPending, "max-pending", "dump MaxPending")
	fset.BoolVar(&cfg.AutoRestore, "auto-restore", cfg.AutoRestore, "restore in the background every -restore-interval")
	fset.Var(&cfg.RestoreInterval, "restore-interval", "Restorer CheckInterval")
	fset.Float64Var(&cfg.AllowRate, "allow-rate", cfg.AllowRate, "Restorer AllowRate: restore while the queue is at most this full")
	fset.Var(&cfg.Postpone, "postpone", "Restorer PostponeInterval")
	fset.Float64Var(&cfg.RestoreRate, "restore-rate", cfg.RestoreRate, "Restorer RateLimit, records/s (0: none)")
	fset.IntVar(&cfg.MaxReplays, "max-replays", cfg.MaxReplays, "Restorer MaxReplays (-1: no limit)")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected arguments: %v\n", fset.Args())
		return 2
	}
	if *waveCalm <= 0 || *waveBurst <= 0 {
		fmt.Fprintln(stderr, "demo: -wave-calm and -wave-burst: want more than 0")
		return 2
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.WorkersMax = *workersMaxF
	if *scenario == "restore" && !set["drain-timeout"] {
		// What an earlier run left may take longer than a scripted load's
		// drain: the Restorer puts it back at the pace the queue takes.
		*drainF = 10 * time.Minute
	}
	s3o.PathStyle = *pathStyle || (s3o.Endpoint != "" && !set["s3-path-style"])
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}

	var sk *sink
	var err error
	switch {
	case s3o.URL != "" && *dir != "":
		fmt.Fprintln(stderr, "demo: -dir and -s3 exclude each other")
		return 2
	case s3o.URL != "":
		sk, err = newS3Sink(ctx, s3o)
	default:
		sk, err = newFSSink(*dir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	app, err := NewApp(AppOptions{Scene: cfg, Sink: sk, KeepDone: *keepDone, LogEvery: *logEvery, Out: stdout})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	if sk.temp {
		fmt.Fprintf(stdout, "dlqdump demo: segments go to %s, a new temporary directory (removed at exit if it holds no segment; -dir DIR keeps them where you say)\n", sk.desc)
	} else {
		fmt.Fprintf(stdout, "dlqdump demo: segments go to %s\n", sk.desc)
	}
	go func() {
		select {
		case <-hurry:
			app.Hurry()
		case <-app.quit:
		}
	}()

	var srv *http.Server
	if *scenario == "" || set["addr"] {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			fmt.Fprintf(stderr, "demo: %v\n", err)
			_ = app.Close(context.Background())
			return 1
		}
		srv = &http.Server{Handler: app.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		fmt.Fprintf(stdout, "dashboard: http://%s/\n", ln.Addr())
	}

	status := 0
	if *scenario != "" {
		sum, err := app.RunScenario(ctx, ScenarioOptions{Name: *scenario, Duration: *durationF, DrainTimeout: *drainF, BurstProducers: *burstProd}, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "demo: %v\n", err)
			status = 1
		}
		if sum != nil {
			sum.Print(stdout)
			if !sum.OK() {
				status = 1
			}
		}
	} else {
		if !*idle {
			s, err := app.StartScene(cfg)
			if err != nil {
				fmt.Fprintf(stderr, "demo: %v\n", err)
				_ = app.Close(context.Background())
				return 1
			}
			if *wavesF {
				burst := *burstProd
				if burst == 0 {
					burst = min(4*max(cfg.Producers, 1), cfg.ProducersMax)
				}
				app.startWaves(s, waveOptions{Calm: cfg.Producers, Burst: burst, CalmFor: *waveCalm, BurstFor: *waveBurst})
				fmt.Fprintf(stdout, "waves: %d producers for %s, then a burst of %d for %s, again and again (-waves=false: steady)\n", cfg.Producers, *waveCalm, burst, *waveBurst)
			}
		}
		<-ctx.Done()
		fmt.Fprintf(stdout, "\nshutting down: new tasks are refused; the workers finish what was accepted (at most %s), the rest goes to the dump (Ctrl-C again: at once; a third time: exit without saving)\n", *shutdownF)
		gctx, gcancel := context.WithTimeout(context.Background(), *shutdownF)
		if err := app.StopScene(gctx, false); err != nil && !errors.Is(err, errNoScene) {
			fmt.Fprintf(stderr, "demo: shutdown: %v\n", err)
			status = 1
		}
		gcancel()
	}

	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := app.Close(sctx); err != nil {
		fmt.Fprintf(stderr, "demo: shutdown: %v\n", err)
		status = 1
	}
	if srv != nil {
		_ = srv.Shutdown(sctx)
	}
	led := app.ledger()
	if *scenario == "" {
		led.Print(stdout)
	}
	if !led.OK() {
		status = 1
	}
	where, ready := sk.whereCount(sctx)
	fmt.Fprintln(stdout, where)
	switch {
	case sk.temp && sk.empty(sctx):
		_ = os.RemoveAll(sk.dir)
		fmt.Fprintf(stdout, "(%s held no segments and was removed)\n", sk.dir)
	case sk.temp:
		fmt.Fprintf(stdout, "%s is kept, with its segments; to restore them (and dump nothing new): go run ./demo -dir %s -scenario restore; to drop them: rm -r %s\n", sk.dir, sk.dir, sk.dir)
	case ready > 0 && sk.dir != "":
		fmt.Fprintf(stdout, "to restore them (and dump nothing new): go run ./demo -dir %s -scenario restore\n", sk.dir)
	case ready > 0 && s3o.URL != "":
		fmt.Fprintf(stdout, "to restore them (and dump nothing new): go run ./demo -s3 %s -scenario restore (with the same S3 flags)\n", s3o.URL)
	}
	return status
}

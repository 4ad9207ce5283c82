package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	dlqprom "github.com/dlqdump/dlqdump/metrics/prometheus"
)

// counters are cumulative over the life of the process (all scenes).
type counters struct {
	produced  atomic.Uint64 // tasks accepted (producers and POST /enqueue)
	processed atomic.Uint64 // tasks done
	failures  atomic.Uint64 // failed attempts
	retries   atomic.Uint64 // retries scheduled
	refused   atomic.Uint64 // tasks not accepted (queue closed, dump refused the leak)
	dumpLost  atomic.Uint64 // tasks the dump refused with nobody to tell: lost
	// tasks accepted and neither processed nor dumped when their scene
	// stopped: lost (a dumper that stayed full past the stop's bound)
	unaccounted atomic.Uint64
	leaked      [4]atomic.Uint64
	// tasks the Restorer put back into the queue, counted as each is (the
	// Restorer's own counter moves once per block): for the rates
	restored atomic.Uint64
}

func (c *counters) leakedTotal() uint64 {
	var n uint64
	for i := range c.leaked {
		n += c.leaked[i].Load()
	}
	return n
}

// AppOptions configure an App.
type AppOptions struct {
	Scene     SceneConfig
	Sink      *sink
	KeepDone  int           // finished producer tasks remembered for GET /tasks/{id}
	LogEvery  time.Duration // a status line this often; 0: never
	SampleDur time.Duration // dashboard sample interval; default 500ms
	Out       io.Writer     // status lines
	Logger    *slog.Logger  // dlqdump's logs; default: warnings and errors to Out
}

// App is the demo process: the task store, the sink, the metrics, the
// current scene and the dashboard's history.
type App struct {
	opts   AppOptions
	store  *store
	sink   *sink
	reg    *prometheus.Registry
	mw     *dlqprom.Writer
	logger *slog.Logger
	c      counters
	seq    atomic.Uint64

	mu    sync.Mutex
	scene *Scene
	waves *waves      // the current scene's, while they run
	prev  sceneTotals // totals of stopped scenes
	cfg   SceneConfig // of the current or last scene

	hist     *history
	segs     *segmentLister
	quar     *quarantineScanner
	lastRest atomic.Pointer[restoreResult]

	outMu sync.Mutex
	out   io.Writer

	quit     chan struct{}
	loopDone chan struct{}
	stopOnce sync.Once
	hurried  atomic.Bool // Hurry was called: stops do not wait for the workers
}

// restoreResult is the outcome of the last pass started from the API.
type restoreResult struct {
	Started  time.Time      `json:"started"`
	Took     string         `json:"took,omitempty"`
	Running  bool           `json:"running"`
	Report   dlqdump.Report `json:"report"`
	Error    string         `json:"error,omitempty"`
	Flushed  bool           `json:"flushed"`
	Segments int            `json:"segments"`
}

// NewApp builds an App; Start starts its first scene.
func NewApp(opts AppOptions) (*App, error) {
	if opts.Sink == nil {
		return nil, errors.New("no sink")
	}
	if opts.KeepDone == 0 {
		opts.KeepDone = 100_000
	}
	if opts.SampleDur == 0 {
		opts.SampleDur = 500 * time.Millisecond
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	a := &App{
		opts:     opts,
		store:    newStore(opts.KeepDone),
		sink:     opts.Sink,
		reg:      prometheus.NewRegistry(),
		cfg:      opts.Scene,
		out:      opts.Out,
		hist:     newHistory(240),
		quit:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	a.logger = opts.Logger
	if a.logger == nil {
		a.logger = slog.New(slog.NewTextHandler(lockedWriter{a}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var err error
	a.mw, err = dlqprom.New(a.reg, "demo")
	if err != nil {
		return nil, err
	}
	if err := a.registerMetrics(); err != nil {
		return nil, err
	}
	cl, err := claims.NewClaimer(a.sink.reader, "demo-dashboard", 30*time.Second, nil)
	if err != nil {
		return nil, err
	}
	a.segs = &segmentLister{rd: a.sink.reader, cl: cl, cache: map[string]uint64{}}
	a.quar = &quarantineScanner{rd: a.sink.reader, st: a.store, seen: map[string]bool{}}
	// What is in quarantine already (an earlier run in -dir) is not ours.
	a.quar.scan(context.Background())
	a.quar.recs.Store(0)
	go a.loop()
	return a, nil
}

// lockedWriter serialises writes to the App's output.
type lockedWriter struct{ a *App }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.a.outMu.Lock()
	defer w.a.outMu.Unlock()
	return w.a.out.Write(p)
}

func (a *App) logf(format string, args ...any) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	fmt.Fprintf(a.out, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// current returns the running scene, nil if none.
func (a *App) current() *Scene {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.scene
}

var errRunning = errors.New("a scene is running; stop it first")

// StartScene starts a scene with cfg.
func (a *App) StartScene(cfg SceneConfig) (*Scene, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.scene != nil {
		return nil, errRunning
	}
	s, err := newScene(a, cfg)
	if err != nil {
		return nil, err
	}
	a.scene, a.cfg = s, cfg
	a.logf("scene started: queue capacity %d, %d workers, %d producers x %.0f/s, fail rate %.2f, dump to %s",
		cfg.Capacity, cfg.Workers, cfg.Producers, cfg.Rate, cfg.FailRate, a.sink.desc)
	return s, nil
}

// StopScene stops the current scene (graceful or force) and returns its
// final totals.
func (a *App) StopScene(ctx context.Context, force bool) error {
	a.mu.Lock()
	s := a.scene
	a.mu.Unlock()
	if s == nil {
		return errNoScene
	}
	a.stopWaves("")
	if a.hurried.Load() {
		s.hurry()
	}
	err := s.stop(ctx, force)
	a.mu.Lock()
	if a.scene == s {
		a.scene = nil
		t := s.totals()
		a.prev.Dumped += t.Dumped
		a.prev.Segments += t.Segments
		a.prev.Restored += t.Restored
		a.prev.Quarantined += t.Quarantined
		a.prev.Retried += t.Retried
	}
	a.mu.Unlock()
	a.quar.scan(context.Background())
	kind := "graceful"
	if force {
		kind = "force"
	}
	if err != nil {
		a.logf("scene stopped (%s): %v", kind, err)
	} else {
		a.logf("scene stopped (%s)", kind)
	}
	return err
}

var errNoScene = errors.New("no scene is running")

// totals returns dlqdump's counters over all scenes.
func (a *App) totals() sceneTotals {
	a.mu.Lock()
	t, s := a.prev, a.scene
	a.mu.Unlock()
	if s != nil {
		c := s.totals()
		t.Dumped += c.Dumped
		t.Segments += c.Segments
		t.Restored += c.Restored
		t.Quarantined += c.Quarantined
		t.Retried += c.Retried
	}
	return t
}

// Close stops the scene (graceful, bounded by ctx: the scene's Queue stores
// everything and closes its Writer) and the background loop.
func (a *App) Close(ctx context.Context) error {
	var errs []error
	if a.current() != nil {
		if err := a.StopScene(ctx, false); err != nil {
			errs = append(errs, err)
		}
	}
	a.stopOnce.Do(func() {
		close(a.quit)
		<-a.loopDone
	})
	return errors.Join(errs...)
}

// Hurry makes a stop in progress (or the next one) stop waiting for the
// workers: what they have not done goes to the dump.
func (a *App) Hurry() {
	a.hurried.Store(true)
	if s := a.current(); s != nil {
		s.hurry()
	}
}

// Restore flushes the dump and runs one restore pass in the background.
func (a *App) Restore() (*restoreResult, error) {
	s := a.current()
	if s == nil {
		return nil, errNoScene
	}
	if r := a.lastRest.Load(); r != nil && r.Running {
		return r, errors.New("a restore pass is already running")
	}
	res := &restoreResult{Started: time.Now(), Running: true}
	a.lastRest.Store(res)
	go func() {
		ctx, cancel := context.WithTimeout(s.passCtx, 2*time.Minute)
		defer cancel()
		fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
		flushErr := s.dump.Flush(fctx)
		fcancel()
		rep, err := s.rst.Run(ctx, dlqdump.RunOptions{})
		done := &restoreResult{Started: res.Started, Took: time.Since(res.Started).Round(time.Millisecond).String(),
			Report: rep, Flushed: flushErr == nil, Segments: rep.Segments}
		if err = errors.Join(flushErr, err); err != nil {
			done.Error = err.Error()
		}
		a.lastRest.Store(done)
		a.logf("restore pass (from the API): %d delivered, %d quarantined, %d segments, took %s",
			rep.Delivered, rep.Quarantined, rep.Segments, done.Took)
	}()
	return res, nil
}

// Flush publishes the dump's open segment.
func (a *App) Flush(ctx context.Context) error {
	s := a.current()
	if s == nil {
		return errNoScene
	}
	return s.dump.Flush(ctx)
}

// loop samples the counters for the dashboard and prints a status line
// every LogEvery.
func (a *App) loop() {
	defer close(a.loopDone)
	t := time.NewTicker(a.opts.SampleDur)
	defer t.Stop()
	var lastLog time.Time
	prev := a.snapshot()
	start := time.Now()
	for {
		select {
		case <-a.quit:
			return
		case <-t.C:
		}
		cur := a.snapshot()
		a.hist.add(makeSample(prev, cur))
		prev = cur
		a.quar.catchUp(context.Background(), cur.totals.Quarantined)
		if a.opts.LogEvery > 0 && time.Since(lastLog) >= a.opts.LogEvery {
			lastLog = time.Now()
			a.logStatus(time.Since(start))
		}
	}
}

// logStatus prints one line: what the scene is doing.
func (a *App) logStatus(up time.Duration) {
	smp := a.hist.last()
	if smp == nil {
		return
	}
	s := a.current()
	if s == nil {
		a.logf("idle (no scene; POST /api/v1/init to start one) | produced %d processed %d dumped %d restored %d quarantined %d",
			smp.Produced, smp.Processed, smp.Dumped, smp.Restored, smp.Quarantined)
		return
	}
	a.logf("up %s | producers %d | queue %d/%d (%.0f%%) | per second: produced %.0f processed %.0f leaked %.0f dumped %.0f restored %.0f | pending %s | segments ready %d | in flight %d",
		up.Round(time.Second), smp.Producers, smp.QueueSize, smp.QueueCap, smp.Fill*100,
		smp.ProducedPS, smp.ProcessedPS, smp.LeakedPS, smp.DumpedPS, smp.RestoredPS,
		humanBytes(smp.Pending), smp.Ready, smp.InFlight)
}

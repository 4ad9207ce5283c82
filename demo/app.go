package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	dlqprom "github.com/dlqdump/dlqdump/metrics/prometheus"
	"github.com/dlqdump/dlqdump/segment"
	dsink "github.com/dlqdump/dlqdump/sink"
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

// snapshot is the raw state the samples are computed from.
type snapshot struct {
	at                            time.Time
	produced, processed, failures uint64
	restored                      uint64 // counters.restored
	leaked                        [4]uint64
	totals                        sceneTotals
	qsize, qcap, producers, busy  int
	workers                       int
	pending                       int64
	ready, quarantinedSegs        int
	inFlight, dumpedTasks, lost   int64
	running                       bool
}

func (a *App) snapshot() snapshot {
	sn := snapshot{at: time.Now(), produced: a.c.produced.Load(), processed: a.c.processed.Load(), failures: a.c.failures.Load(), restored: a.c.restored.Load()}
	for i := range sn.leaked {
		sn.leaked[i] = a.c.leaked[i].Load()
	}
	sn.totals = a.totals()
	if s := a.current(); s != nil {
		sn.running = true
		sn.qsize, sn.qcap = s.q.Size(), s.q.Capacity()
		sn.producers = int(s.prodUp.Load())
		sn.busy = int(s.busy.Load())
		sn.workers = s.cfg.Workers
		if s.cfg.WorkersMax > s.cfg.Workers {
			sn.workers = s.cfg.WorkersMax
		}
		sn.pending = s.dump.Stats().Pending
	}
	sn.ready, sn.quarantinedSegs = a.segs.counts(context.Background())
	sn.inFlight = a.store.inFlight()
	sn.dumpedTasks = a.store.counts[stDumped].Load()
	sn.lost = a.store.counts[stFailed].Load()
	return sn
}

// sample is one point of the dashboard's charts.
type sample struct {
	T           int64   `json:"t"` // Unix milliseconds
	Running     bool    `json:"running"`
	QueueSize   int     `json:"queue_size"`
	QueueCap    int     `json:"queue_capacity"`
	Fill        float64 `json:"fill"`
	Producers   int     `json:"producers"`
	Workers     int     `json:"workers"`
	Busy        int     `json:"busy"`
	ProducedPS  float64 `json:"produced_ps"`
	ProcessedPS float64 `json:"processed_ps"`
	LeakedPS    float64 `json:"leaked_ps"`
	DumpedPS    float64 `json:"dumped_ps"`
	RestoredPS  float64 `json:"restored_ps"`
	QuarPS      float64 `json:"quarantined_ps"`
	FailuresPS  float64 `json:"failures_ps"`
	Pending     int64   `json:"pending_bytes"`
	Ready       int     `json:"segments_ready"`
	QuarSegs    int     `json:"segments_quarantined"`
	Published   uint64  `json:"segments_published"`
	Produced    uint64  `json:"produced"`
	Processed   uint64  `json:"processed"`
	Leaked      uint64  `json:"leaked"`
	Dumped      uint64  `json:"dumped"`
	Restored    uint64  `json:"restored"`
	Quarantined uint64  `json:"quarantined"`
	InFlight    int64   `json:"in_flight"`
	InDump      int64   `json:"in_dump"`
	Lost        int64   `json:"lost"`
}

func makeSample(p, c snapshot) sample {
	dt := c.at.Sub(p.at).Seconds()
	if dt <= 0 {
		dt = 1
	}
	rate := func(a, b uint64) float64 {
		if b < a {
			return 0
		}
		return float64(b-a) / dt
	}
	var pl, cl uint64
	for i := range c.leaked {
		pl += p.leaked[i]
		cl += c.leaked[i]
	}
	s := sample{
		T: c.at.UnixMilli(), Running: c.running, QueueSize: c.qsize, QueueCap: c.qcap,
		Producers: c.producers, Workers: c.workers, Busy: c.busy,
		ProducedPS: rate(p.produced, c.produced), ProcessedPS: rate(p.processed, c.processed),
		LeakedPS: rate(pl, cl), DumpedPS: rate(p.totals.Dumped, c.totals.Dumped),
		RestoredPS: rate(p.restored, c.restored), QuarPS: rate(p.totals.Quarantined, c.totals.Quarantined),
		FailuresPS: rate(p.failures, c.failures),
		Pending:    c.pending, Ready: c.ready, QuarSegs: c.quarantinedSegs, Published: c.totals.Segments,
		Produced: c.produced, Processed: c.processed, Leaked: cl, Dumped: c.totals.Dumped,
		Restored: c.totals.Restored, Quarantined: c.totals.Quarantined,
		InFlight: c.inFlight, InDump: c.dumpedTasks, Lost: c.lost,
	}
	if c.qcap > 0 {
		s.Fill = float64(c.qsize) / float64(c.qcap)
	}
	return s
}

// history is a ring of samples.
type history struct {
	mu  sync.Mutex
	buf []sample
	n   int
	pos int
}

func newHistory(n int) *history { return &history{buf: make([]sample, n)} }

func (h *history) add(s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf[h.pos] = s
	h.pos = (h.pos + 1) % len(h.buf)
	if h.n < len(h.buf) {
		h.n++
	}
}

func (h *history) all() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sample, 0, h.n)
	start := (h.pos - h.n + len(h.buf)) % len(h.buf)
	for i := range h.n {
		out = append(out, h.buf[(start+i)%len(h.buf)])
	}
	return out
}

func (h *history) last() *sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return nil
	}
	s := h.buf[(h.pos-1+len(h.buf))%len(h.buf)]
	return &s
}

// segmentRow is a row of the dashboard's segment table.
type segmentRow struct {
	Name     string    `json:"name"`
	Area     string    `json:"area"`
	Size     int64     `json:"size"`
	Records  uint64    `json:"records"`
	Modified time.Time `json:"modified"`
	Claimed  bool      `json:"claimed"`
	Reason   string    `json:"reason,omitempty"`
}

// segmentLister lists the newest segments, reading each one's record count
// from its footer once (segments do not change once published).
type segmentLister struct {
	rd    dlqdump.Reader
	cl    *claims.Claimer // reads claim records, never claims
	mu    sync.Mutex
	cache map[string]uint64

	cmu              sync.Mutex
	countedAt        time.Time
	ready, quarantin int
}

// counts returns how many segments are ready and quarantined, listing the
// store at most once a second.
func (l *segmentLister) counts(ctx context.Context) (ready, quarantined int) {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if time.Since(l.countedAt) < time.Second {
		return l.ready, l.quarantin
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l.countedAt = time.Now()
	r, q := 0, 0
	for _, err := range l.rd.List(ctx, dsink.AreaReady) {
		if err != nil {
			return l.ready, l.quarantin
		}
		r++
	}
	for _, err := range l.rd.List(ctx, dsink.AreaQuarantine) {
		if err != nil {
			return l.ready, l.quarantin
		}
		q++
	}
	l.ready, l.quarantin = r, q
	return r, q
}

func (l *segmentLister) list(ctx context.Context, n int) ([]segmentRow, error) {
	var rows []segmentRow
	records := map[string]bool{}
	for name, err := range l.rd.RecordNames(ctx) {
		if err != nil {
			return nil, err
		}
		records[name] = true
	}
	for _, area := range []dsink.Area{dsink.AreaReady, dsink.AreaQuarantine} {
		for si, err := range l.rd.List(ctx, area) {
			if err != nil {
				return nil, err
			}
			row := segmentRow{Name: si.Name, Area: area.String(), Size: si.Size, Modified: si.Modified, Reason: si.Reason}
			if area == dsink.AreaReady && records[si.Name] {
				_, row.Claimed, _ = l.cl.Inspect(ctx, si.Name)
			}
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b segmentRow) int { return -compareStrings(a.Name, b.Name) })
	if len(rows) > n {
		rows = rows[:n]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range rows {
		key := rows[i].Area + "/" + rows[i].Name
		if c, ok := l.cache[key]; ok {
			rows[i].Records = c
			continue
		}
		area, _ := dsink.ParseArea(rows[i].Area)
		if c, ok := footerRecords(ctx, l.rd, area, rows[i].Name); ok {
			l.cache[key] = c
			rows[i].Records = c
		}
	}
	if len(l.cache) > 4096 {
		clear(l.cache)
	}
	return rows, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func footerRecords(ctx context.Context, rd dlqdump.Reader, area dsink.Area, name string) (uint64, bool) {
	f, err := rd.Open(ctx, area, name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
	if err != nil || sr.Footer() == nil {
		return 0, false
	}
	return sr.Footer().Records, true
}

// quarantineScanner reads new quarantine segments and marks their tasks
// quarantined.
type quarantineScanner struct {
	rd   dlqdump.Reader
	st   *store
	mu   sync.Mutex
	seen map[string]bool
	recs atomic.Uint64 // quarantined records found
}

// catchUp scans when the Restorer quarantined more records than were found:
// the counter moves before the quarantine segment is published.
func (q *quarantineScanner) catchUp(ctx context.Context, quarantined uint64) {
	if quarantined > q.recs.Load() {
		q.scan(ctx)
	}
}

func (q *quarantineScanner) scan(ctx context.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for si, err := range q.rd.List(ctx, dsink.AreaQuarantine) {
		if err != nil {
			return
		}
		if q.seen[si.Name] {
			continue
		}
		f, err := q.rd.Open(ctx, dsink.AreaQuarantine, si.Name)
		if err != nil {
			continue
		}
		sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
		if err != nil {
			f.Close()
			continue
		}
		for {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			q.recs.Add(1)
			why, _ := rec.Headers.Get(dlqdump.HeaderQuarantine)
			var r record
			if json.Unmarshal(rec.Payload, &r) != nil {
				continue
			}
			t := q.st.get(r.ID)
			if t == nil {
				continue
			}
			t.mu.Lock()
			if t.state != stQuarantined && t.state != stDone {
				t.setLocked(stQuarantined, why)
			}
			t.mu.Unlock()
		}
		f.Close()
		q.seen[si.Name] = true
	}
}

// humanBytes formats n as 512B, 1.5KiB, 12MiB.
func humanBytes(n int64) string {
	v, units := float64(n), []string{"B", "KiB", "MiB", "GiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 || v >= 10 {
		return fmt.Sprintf("%.0f%s", v, units[i])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}

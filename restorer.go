package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/segment"
)

// Restorer brings dumped items back (seed: Restorer). It lists the ready
// segments of Config.Reader oldest first, claims each (a lease, so several
// restorers, in one process or many, never feed the same segment at once),
// checks its Version, decodes every record with Config.Decoder and enqueues
// it into Config.Queue, no faster than Config.RateLimit and only while the
// destination's Rate is at most Config.AllowRate. It checkpoints after every
// block, so a restorer that dies is resumed near where it stopped, and
// deletes (or archives) a segment only when every record in it was accepted
// or quarantined.
//
// Records that cannot be restored are never dropped: a record that does not
// decode, that the destination refuses Config.MaxAttempts times, or that was
// replayed Config.MaxReplays times is written to a quarantine segment with the
// reason; a segment of another Version or with damaged blocks is moved to
// quarantine whole.
//
// After a crash, the records of at most one block (the one being delivered)
// may be delivered again; see Config.CheckpointInterval and RunOptions.
type Restorer struct {
	c   *restorerConfig
	mw  MetricsWriter
	log *slog.Logger
	lim *limiter

	run      chan struct{} // a token: one pass at a time
	stopping atomic.Bool   // Close: stop at the next block
	mu       sync.Mutex
	closed   bool
	skip     map[string]string // segments left in place (VersionKeep), by reason
	bgCancel context.CancelFunc
	bgDone   chan struct{}

	restored, retried, quarantined, bytes atomic.Uint64
	ready, claimed, quarSegs              atomic.Int64
	oldest                                atomic.Int64 // ns
	lastErr                               atomic.Pointer[error]
}

// RunOptions select what a pass restores. The zero value restores
// everything.
type RunOptions struct {
	// Since and Until restore only records that entered the dump in
	// [Since, Until); zero means unbounded.
	Since, Until time.Time
	// Where restores only records having all these header values.
	Where Headers
	// Limit stops the pass after this many records were delivered; the
	// segment in progress is released at that record and resumed there by
	// the next pass. 0: no limit.
	Limit uint64
	// DryRun counts what would be restored, by reason, and changes nothing:
	// no claim, no delivery, no quarantine.
	DryRun bool
	// Segments restricts the pass to these segment names.
	Segments []string

	stopAt time.Time // the background window closes
}

// filtered reports whether only some records are selected; the others are
// then written to a new ready segment (the remainder) before the original is
// removed.
func (o *RunOptions) filtered() bool {
	return !o.Since.IsZero() || !o.Until.IsZero() || len(o.Where) > 0
}

func (o *RunOptions) selects(rec *segment.Record) bool {
	if !o.Since.IsZero() && rec.Time < o.Since.UnixNano() || !o.Until.IsZero() && rec.Time >= o.Until.UnixNano() {
		return false
	}
	for k, v := range o.Where {
		if got, ok := rec.Headers.Get(k); !ok || got != v {
			return false
		}
	}
	return true
}

func (o *RunOptions) wants(name string) bool {
	if o.Segments == nil {
		return true
	}
	for _, s := range o.Segments {
		if s == name {
			return true
		}
	}
	return false
}

// Report counts what a pass did (or, with DryRun, would do).
type Report struct {
	// Segments counts segments completed (deleted or archived).
	Segments int
	// Delivered counts records the destination accepted.
	Delivered uint64
	// Retried counts refused enqueues that were retried.
	Retried uint64
	// Quarantined counts records moved to quarantine, including those of
	// whole quarantined segments when known.
	Quarantined uint64
	// Skipped counts records the filters left in the dump.
	Skipped uint64
	// Bytes counts payload bytes delivered.
	Bytes uint64
	// QuarantinedSegments and DeletedSegments count whole segments moved
	// aside or deleted for their Version or damage.
	QuarantinedSegments, DeletedSegments int
	// DamagedBlocks counts blocks that could not be read.
	DamagedBlocks int
	// ByReason counts delivered records by their HeaderReason ("" when
	// absent); in a dry run, the records that would be delivered, and
	// "quarantine: ..." entries for those that would be quarantined.
	ByReason map[string]uint64
}

// RestorerStats describe a Restorer and its store.
type RestorerStats struct {
	// Ready, Claimed and Quarantined count segments, as of the last pass.
	Ready, Claimed, Quarantined int
	// Restored, Retried and QuarantinedRecords count records since start.
	Restored, Retried, QuarantinedRecords uint64
	// Bytes counts payload bytes restored since start.
	Bytes uint64
	// OldestReady is the age of the oldest ready record, as of the last pass.
	OldestReady time.Duration
	// LastError is the last error a pass met, nil if none.
	LastError error
}

// errStop ends a pass early without error: limit reached, window closed or
// Close.
var errStop = errors.New("dlqdump: pass stopped")

// NewRestorer validates the config and returns a Restorer. It does nothing
// until Restore, Run, RunAt or Start is called.
func NewRestorer(config *Config) (*Restorer, error) {
	c, err := config.restorerConfig()
	if err != nil {
		return nil, err
	}
	r := &Restorer{
		c:    c,
		mw:   c.MetricsWriter,
		log:  c.Logger.With(slog.String("component", "dlqdump.Restorer"), slog.String("owner", c.Owner)),
		run:  make(chan struct{}, 1),
		skip: map[string]string{},
	}
	if c.RateLimit > 0 {
		r.lim = newLimiter(c.RateLimit)
	}
	if err := recoverSink(c.Reader, r.log, r.mw); err != nil {
		return nil, err
	}
	return r, nil
}

// Restore makes one pass: restores every segment ready now and returns.
func (r *Restorer) Restore(ctx context.Context) error {
	_, err := r.Run(ctx, RunOptions{})
	return err
}

// Run makes one pass with options and reports what it did. Segments claimed
// by other restorers are left to them. Errors with one segment do not stop the
// pass; they are joined into the returned error.
func (r *Restorer) Run(ctx context.Context, opts RunOptions) (Report, error) {
	rep := Report{ByReason: map[string]uint64{}}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return rep, ErrClosed
	}
	select {
	case r.run <- struct{}{}:
		defer func() { <-r.run }()
	case <-ctx.Done():
		return rep, ctx.Err()
	}
	infos, err := r.list(ctx)
	if err != nil {
		r.setErr(err)
		return rep, err
	}
	var errs []error
	for _, si := range infos {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if !opts.wants(si.Name) || opts.Limit > 0 && rep.Delivered >= opts.Limit {
			continue
		}
		r.mu.Lock()
		_, skipped := r.skip[si.Name]
		r.mu.Unlock()
		if skipped || si.Claim != nil && si.Claim.Owner != r.c.Owner && si.Claim.Expires.After(time.Now()) {
			continue
		}
		if opts.DryRun {
			err = r.dryRun(ctx, si.Name, &opts, &rep)
		} else {
			err = r.restoreSegment(ctx, si.Name, &opts, &rep)
		}
		switch {
		case err == nil:
		case errors.Is(err, errStop):
			return rep, errors.Join(errs...)
		case errors.Is(err, ErrClaimed), errors.Is(err, ErrNotFound):
			// Another restorer got there first.
		case ctx.Err() != nil:
			return rep, ctx.Err()
		default:
			r.setErr(err)
			r.log.Warn("restoring a segment failed", slog.String("segment", si.Name), slog.Any("error", err))
			if len(errs) < 8 {
				errs = append(errs, err)
			}
		}
	}
	return rep, errors.Join(errs...)
}

// RunAt waits until at (cancellable by ctx), then runs one pass.
func (r *Restorer) RunAt(ctx context.Context, at time.Time, opts RunOptions) (Report, error) {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
	return r.Run(ctx, opts)
}

// list lists ready and quarantined segments and updates the gauges.
func (r *Restorer) list(ctx context.Context) ([]SegmentInfo, error) {
	var infos []SegmentInfo
	var claimed int64
	now := time.Now()
	for si, err := range r.c.Reader.List(ctx, AreaReady) {
		if err != nil {
			return nil, fmt.Errorf("dlqdump: list ready segments: %w", err)
		}
		if si.Claim != nil && si.Claim.Expires.After(now) {
			claimed++
		}
		infos = append(infos, si)
	}
	var quar int64
	for _, err := range r.c.Reader.List(ctx, AreaQuarantine) {
		if err != nil {
			return nil, fmt.Errorf("dlqdump: list quarantined segments: %w", err)
		}
		quar++
	}
	var oldest time.Duration
	if len(infos) > 0 {
		if t, ok := segment.ParseFileName(infos[0].Name); ok {
			oldest = max(now.Sub(t), 0)
		}
	}
	r.ready.Store(int64(len(infos)))
	r.claimed.Store(claimed)
	r.quarSegs.Store(quar)
	r.oldest.Store(int64(oldest))
	r.mw.Source(len(infos), oldest)
	return infos, nil
}

// Stats returns counters and the state of the store as of the last pass.
func (r *Restorer) Stats() RestorerStats {
	s := RestorerStats{
		Ready:              int(r.ready.Load()),
		Claimed:            int(r.claimed.Load()),
		Quarantined:        int(r.quarSegs.Load()),
		Restored:           r.restored.Load(),
		Retried:            r.retried.Load(),
		QuarantinedRecords: r.quarantined.Load(),
		Bytes:              r.bytes.Load(),
		OldestReady:        time.Duration(r.oldest.Load()),
	}
	if e := r.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

func (r *Restorer) setErr(err error) {
	r.lastErr.Store(&err)
}

// Start runs passes in the background every CheckInterval, within
// Config.Windows, until Close.
func (r *Restorer) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.bgDone != nil {
		return fmt.Errorf("dlqdump: Restorer already started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.bgCancel, r.bgDone = cancel, make(chan struct{})
	go r.background(ctx)
	return nil
}

func (r *Restorer) background(ctx context.Context) {
	defer close(r.bgDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		now := time.Now()
		opts := RunOptions{}
		if len(r.c.Windows) > 0 {
			open, closes := r.window(now)
			if open.After(now) {
				r.log.Debug("outside the restore windows", slog.Time("next", open))
				t.Reset(open.Sub(now))
				continue
			}
			opts.stopAt = closes
		}
		rep, err := r.Run(ctx, opts)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("restore pass failed", slog.Any("error", err))
		}
		if rep.Delivered > 0 || rep.Quarantined > 0 {
			r.log.Info("restore pass", slog.Uint64("delivered", rep.Delivered), slog.Uint64("quarantined", rep.Quarantined), slog.Int("segments", rep.Segments))
		}
		if r.stopping.Load() {
			return
		}
		t.Reset(r.c.CheckInterval)
	}
}

// window returns when the next window opens (now if one is open) and when
// that window closes.
func (r *Restorer) window(now time.Time) (open, closes time.Time) {
	for i, w := range r.c.Windows {
		o := w.next(now)
		c := o.In(w.loc())
		y, m, d := c.Date()
		end := time.Date(y, m, d, 0, 0, 0, 0, w.loc()).Add(w.End)
		if w.Start > w.End && (o.Equal(now) && end.Before(o) || !o.Equal(now)) {
			end = end.AddDate(0, 0, 1)
		}
		if !end.After(o) {
			end = end.AddDate(0, 0, 1)
		}
		if i == 0 || o.Before(open) || o.Equal(open) && end.After(closes) {
			open, closes = o, end
		}
	}
	return open, closes
}

// Close stops background passes, letting the segment in progress reach its
// next block and release its claim. A second call returns ErrClosed.
func (r *Restorer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.c.Lease)
	defer cancel()
	return r.Shutdown(ctx)
}

// Shutdown is Close bounded by ctx: when ctx ends, the pass in progress is
// cancelled (its claim then expires and is taken over after the lease).
func (r *Restorer) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closed = true
	r.stopping.Store(true)
	cancel, done := r.bgCancel, r.bgDone
	r.mu.Unlock()
	// Wait for a pass in progress (background or not) to stop.
	select {
	case r.run <- struct{}{}:
		<-r.run
	case <-ctx.Done():
		if cancel != nil {
			cancel()
		}
	}
	if cancel != nil {
		cancel()
		<-done
	}
	return ctx.Err()
}

// versionOK reports whether segments of version v are restored.
func (r *Restorer) versionOK(v Version) bool {
	return v == r.c.Version || r.c.VersionCompatible != nil && r.c.VersionCompatible(v, r.c.Version)
}

// restoreSegment claims a segment and restores it.
func (r *Restorer) restoreSegment(ctx context.Context, name string, opts *RunOptions, rep *Report) error {
	claim, err := r.c.Reader.Claim(ctx, name, r.c.Owner, r.c.Lease)
	if err != nil {
		return err
	}
	s := r.newSession(ctx, claim)
	defer s.close()
	err = r.restoreClaimed(s, opts, rep)
	if err != nil && !s.ended {
		// Keep the checkpoint; the next claim resumes there.
		if rerr := s.claim.Release(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, ErrLeaseLost) {
			err = errors.Join(err, fmt.Errorf("release claim: %w", rerr))
		}
	}
	return err
}

// segRun is the state of restoring one claimed segment.
type segRun struct {
	r       *Restorer
	s       *session
	opts    *RunOptions
	rep     *Report
	name    string
	hdr     segment.Header
	cp      Checkpoint
	sr      *segment.Reader
	quar    *sideWriter // quarantined records
	rest    *sideWriter // records the filters did not select
	damaged []error

	filtered bool // opts.filtered(), once

	// Counted per record, added to the shared counters per block.
	delivered, bytes uint64
	reasons          reasonCounter
}

// flushCounts adds the block's counts to the Restorer's and the report's.
func (g *segRun) flushCounts() {
	g.r.restored.Add(g.delivered)
	g.r.bytes.Add(g.bytes)
	g.delivered, g.bytes = 0, 0
	g.reasons.flush()
}

// reasonCounter counts records by HeaderReason into m without a map
// operation per record: a run of records with the same reason is counted
// first and added when the reason changes or the block ends.
type reasonCounter struct {
	m    map[string]uint64
	last []byte
	n    uint64
}

func (c *reasonCounter) count(rec *segment.Record) {
	v, _ := rec.Headers.Lookup(HeaderReason)
	if c.n > 0 && string(v) == string(c.last) {
		c.n++
		return
	}
	c.flush()
	c.last, c.n = append(c.last[:0], v...), 1
}

func (c *reasonCounter) flush() {
	if c.n > 0 {
		c.m[string(c.last)] += c.n
		c.n = 0
	}
}

func (r *Restorer) restoreClaimed(s *session, opts *RunOptions, rep *Report) error {
	ctx := s.ctx
	name := s.claim.Name()
	f, err := r.c.Reader.Open(ctx, AreaReady, name)
	if err != nil {
		return err
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
	if err != nil {
		var ce *segment.CorruptError
		if !errors.As(err, &ce) {
			return err
		}
		rep.QuarantinedSegments++
		r.mw.Quarantine("damaged", 0)
		r.log.Warn("quarantining an unreadable segment", slog.String("segment", name), slog.Any("error", err))
		return s.quarantine("unreadable: " + err.Error())
	}
	hdr := sr.Header()
	if v := Version(hdr.DataVersion); !r.versionOK(v) {
		return r.versionMismatch(s, sr, v, rep)
	}
	g := &segRun{r: r, s: s, opts: opts, rep: rep, name: name, hdr: hdr, cp: s.claim.Checkpoint()}
	g.reasons.m = rep.ByReason
	g.filtered = opts.filtered()
	if g.cp.Position != (segment.Position{}) {
		if err := sr.Seek(g.cp.Position); err != nil {
			r.log.Warn("checkpoint outside the segment; restoring it from the start", slog.String("segment", name), slog.Any("error", err))
			g.cp = Checkpoint{}
		}
	}
	g.sr = sr
	blocks, stop := prefetch(sr)
	defer stop()
	for br := range blocks {
		if br.err != nil {
			if br.err == io.EOF { // the bare sentinel: the reader reached the end
				break
			}
			var ce *segment.CorruptError
			if !errors.As(br.err, &ce) {
				return g.abort(br.err)
			}
			g.damaged = append(g.damaged, br.err)
			rep.DamagedBlocks++
			r.mw.Fail("corrupt")
			r.log.Warn("skipping a damaged block", slog.String("segment", name), slog.Any("error", br.err))
			continue
		}
		err := g.block(br.b)
		br.release()
		if err != nil {
			return err
		}
	}
	return g.finish()
}

// block delivers the records of one block, then checkpoints.
func (g *segRun) block(b *segment.Block) error {
	defer g.flushCounts()
	for i := range b.Len() {
		rec := b.Record(i)
		if err := g.record(&rec); err != nil {
			if errors.Is(err, errStop) {
				// Stop at this record: it is the next to deliver.
				return g.stop(segment.Position{Offset: b.Info().Offset, Seq: rec.Seq}, err)
			}
			return g.abort(err)
		}
	}
	pos := b.Next()
	if g.r.stopping.Load() || !g.opts.stopAt.IsZero() && time.Now().After(g.opts.stopAt) {
		return g.stop(pos, errStop)
	}
	return g.checkpoint(pos, false)
}

// record delivers, quarantines or sets aside one record.
func (g *segRun) record(rec *segment.Record) error {
	r := g.r
	if g.filtered && !g.opts.selects(rec) {
		g.rep.Skipped++
		return g.side(&g.rest, AreaReady, rec, nil)
	}
	if g.opts.Limit > 0 && g.rep.Delivered >= g.opts.Limit {
		return errStop
	}
	replays := replaysOf(rec)
	if r.c.MaxReplays >= 0 && replays >= r.c.MaxReplays {
		return g.quarantine(rec, "replays", fmt.Sprintf("replayed %d times, MaxReplays is %d", replays, r.c.MaxReplays))
	}
	item, err := r.c.Decoder.Decode(rec.Payload)
	if err != nil {
		return g.quarantine(rec, "decode", "decode: "+err.Error())
	}
	item = r.withHeaders(item, rec, replays)
	err = g.deliver(item)
	switch {
	case err == nil:
		g.cp.Delivered++
		g.rep.Delivered++
		g.rep.Bytes += uint64(len(rec.Payload))
		g.reasons.count(rec)
		g.delivered++
		g.bytes += uint64(len(rec.Payload))
		r.mw.Restore(len(rec.Payload))
		return nil
	case errors.As(err, new(*refusedError)):
		return g.quarantine(rec, "refused", err.Error())
	}
	return err
}

// replaysOf returns the record's replay count, 0 when absent or malformed.
func replaysOf(rec *segment.Record) int {
	v, ok := rec.Headers.Lookup(HeaderReplays)
	if !ok {
		return 0
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' || n > 1<<20 {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// countReason counts a delivered record under its HeaderReason, without
// allocating for a reason already counted.
func (rep *Report) countReason(rec *segment.Record) {
	v, _ := rec.Headers.Lookup(HeaderReason)
	if _, ok := rep.ByReason[string(v)]; ok {
		rep.ByReason[string(v)]++ // the key exists: no allocation
		return
	}
	rep.ByReason[string(v)] = 1
}

// withHeaders gives the item the record's headers, the replay count raised,
// when the item carries headers or envelopes are delivered.
func (r *Restorer) withHeaders(item any, rec *segment.Record, replays int) any {
	carrier, isCarrier := item.(HeaderCarrier)
	if !isCarrier && !r.c.DeliverEnvelope {
		return item
	}
	h := Headers(rec.Headers.Map())
	if h == nil {
		h = Headers{}
	}
	h[HeaderReplays] = strconv.Itoa(replays + 1)
	if isCarrier {
		carrier.SetDLQHeaders(h)
	}
	if r.c.DeliverEnvelope {
		return &Envelope{Item: item, Headers: h}
	}
	return item
}

// refusedError is a record the destination refused MaxAttempts times.
type refusedError struct {
	attempts int
	err      error
}

func (e *refusedError) Error() string {
	if e.attempts == 1 {
		return fmt.Sprintf("refused by the destination: %v", e.err)
	}
	return fmt.Sprintf("refused by the destination %d times: %v", e.attempts, e.err)
}

func (e *refusedError) Unwrap() error { return e.err }

// deliver enqueues item into the destination: waiting while its Rate is above
// AllowRate, within RateLimit, retrying refusals with backoff and full jitter.
func (g *segRun) deliver(item any) error {
	r, s := g.r, g.s
	for attempt := 1; ; attempt++ {
		if err := r.waitRoom(s); err != nil {
			return err
		}
		if r.lim != nil {
			if err := r.lim.wait(s.ctx); err != nil {
				return err
			}
		}
		if err := s.hold(); err != nil {
			return err
		}
		err := r.c.Queue.Enqueue(item)
		if err == nil {
			return nil
		}
		if attempt >= r.c.MaxAttempts {
			return &refusedError{attempts: attempt, err: err}
		}
		g.rep.Retried++
		r.retried.Add(1)
		r.mw.Retry()
		if err := backoff.Sleep(s.ctx, backoff.FullJitter(r.c.RetryBase, r.c.RetryMax, attempt)); err != nil {
			return err
		}
	}
}

// waitRoom waits while the destination's Rate is above AllowRate.
func (r *Restorer) waitRoom(s *session) error {
	if r.c.rater == nil || r.c.AllowRate >= 1 {
		return nil
	}
	for r.c.rater.Rate() > r.c.AllowRate {
		if err := backoff.Sleep(s.ctx, r.c.PostponeInterval); err != nil {
			return err
		}
	}
	return nil
}

// quarantine writes rec to the quarantine segment with the reason.
func (g *segRun) quarantine(rec *segment.Record, label, reason string) error {
	extra := map[string]string{
		HeaderQuarantine: reason,
		HeaderOrigin:     g.name + "#" + strconv.FormatUint(rec.Seq, 10),
	}
	if err := g.side(&g.quar, AreaQuarantine, rec, extra); err != nil {
		return err
	}
	g.cp.Quarantined++
	g.rep.Quarantined++
	g.r.quarantined.Add(1)
	g.r.mw.Quarantine(label, 1)
	if g.opts.DryRun {
		g.rep.ByReason["quarantine: "+label]++
	}
	g.r.log.Debug("quarantined a record", slog.String("segment", g.name), slog.Uint64("seq", rec.Seq), slog.String("reason", reason))
	return nil
}

// side copies rec into a side segment (quarantine or remainder), created on
// first use.
func (g *segRun) side(w **sideWriter, area Area, rec *segment.Record, extra map[string]string) error {
	if *w == nil {
		sw, err := newSideWriter(g.s.ctx, g.r.c.Reader, area, g.hdr)
		if err != nil {
			return err
		}
		*w = sw
	}
	return (*w).w.Copy(rec, extra)
}

// sideFull is the size at which side segments are published mid-segment.
const sideFull = 4 << 20

// checkpoint records that everything before pos is handled. Side segments
// are published first when due; a checkpoint is written only when none holds
// unpublished records, so a crash never loses them.
func (g *segRun) checkpoint(pos segment.Position, force bool) error {
	for _, w := range []**sideWriter{&g.quar, &g.rest} {
		if *w != nil && (force || (*w).w.Size() >= sideFull) {
			if err := (*w).commit(g.s.ctx); err != nil {
				return g.abort(err)
			}
			*w = nil
		}
	}
	if g.quar != nil || g.rest != nil {
		return nil
	}
	g.cp.Position = pos
	if err := g.s.checkpoint(g.cp, force); err != nil {
		return g.abort(err)
	}
	return nil
}

// stop ends the pass at pos: publishes side segments, checkpoints, releases.
func (g *segRun) stop(pos segment.Position, cause error) error {
	if err := g.checkpoint(pos, true); err != nil {
		return err
	}
	if err := g.s.release(); err != nil {
		return err
	}
	return cause
}

// abort gives up on the segment after an error: side segments are discarded
// (the records are handled again from the last checkpoint).
func (g *segRun) abort(err error) error {
	for _, w := range []*sideWriter{g.quar, g.rest} {
		if w != nil {
			_ = w.sw.Abort()
		}
	}
	g.quar, g.rest = nil, nil
	return err
}

// finish completes the segment: publishes side segments, then deletes or
// archives it, or quarantines it when blocks were damaged. It refuses when
// the reader did not get to the end of the segment: a segment is never
// removed before every record in it was handled.
func (g *segRun) finish() error {
	if !g.sr.AtEnd() {
		return g.abort(fmt.Errorf("dlqdump: segment %s: reading stopped at offset %d before the end; not completing it", g.name, g.sr.Pos().Offset))
	}
	for _, w := range []**sideWriter{&g.quar, &g.rest} {
		if *w != nil {
			if err := (*w).commit(g.s.ctx); err != nil {
				return g.abort(err)
			}
			*w = nil
		}
	}
	if len(g.damaged) > 0 {
		reason := fmt.Sprintf("%d damaged blocks (first: %v); the %d intact records were restored or quarantined",
			len(g.damaged), g.damaged[0], g.cp.Delivered+g.cp.Quarantined)
		g.rep.QuarantinedSegments++
		g.r.mw.Quarantine("damaged", 0)
		g.r.log.Warn("quarantining a damaged segment", slog.String("segment", g.name), slog.String("reason", reason))
		return g.s.quarantine(reason)
	}
	if err := g.s.complete(g.r.c.Archive); err != nil {
		return err
	}
	g.rep.Segments++
	return nil
}

// versionMismatch applies the VersionPolicy to a segment of another version.
func (r *Restorer) versionMismatch(s *session, sr *segment.Reader, v Version, rep *Report) error {
	name := s.claim.Name()
	reason := fmt.Sprintf("version %s, restorer expects %s", v, r.c.Version)
	var records int
	if f := sr.Footer(); f != nil {
		records = int(f.Records)
	}
	switch r.c.VersionPolicy {
	case VersionDelete:
		r.log.Warn("deleting a segment of another version", slog.String("segment", name), slog.String("reason", reason), slog.Int("records", records))
		r.mw.Fail("version_deleted")
		rep.DeletedSegments++
		return s.complete(false)
	case VersionKeep:
		r.mu.Lock()
		r.skip[name] = reason
		r.mu.Unlock()
		r.log.Info("leaving a segment of another version in place", slog.String("segment", name), slog.String("reason", reason))
		return s.release()
	}
	r.log.Warn("quarantining a segment of another version", slog.String("segment", name), slog.String("reason", reason))
	r.mw.Quarantine("version", records)
	rep.QuarantinedSegments++
	rep.Quarantined += uint64(records)
	r.quarantined.Add(uint64(records))
	return s.quarantine(reason)
}

// dryRun counts what restoring a segment would do, changing nothing.
func (r *Restorer) dryRun(ctx context.Context, name string, opts *RunOptions, rep *Report) error {
	f, err := r.c.Reader.Open(ctx, AreaReady, name)
	if err != nil {
		return err
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
	if err != nil {
		var ce *segment.CorruptError
		if errors.As(err, &ce) {
			rep.QuarantinedSegments++
			rep.ByReason["quarantine: damaged"]++
			return nil
		}
		return err
	}
	if v := Version(sr.Header().DataVersion); !r.versionOK(v) {
		n := uint64(0)
		if ft := sr.Footer(); ft != nil {
			n = ft.Records
		}
		rep.ByReason["quarantine: version "+v.String()] += n
		rep.QuarantinedSegments++
		return nil
	}
	var b segment.Block
	for {
		err := sr.ReadBlock(&b)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var ce *segment.CorruptError
			if !errors.As(err, &ce) {
				return err
			}
			rep.DamagedBlocks++
			continue
		}
		for i := range b.Len() {
			rec := b.Record(i)
			switch {
			case !opts.selects(&rec):
				rep.Skipped++
				continue
			case opts.Limit > 0 && rep.Delivered >= opts.Limit:
				return errStop
			}
			if replays := replaysOf(&rec); r.c.MaxReplays >= 0 && replays >= r.c.MaxReplays {
				rep.Quarantined++
				rep.ByReason["quarantine: replays"]++
				continue
			}
			if _, err := r.c.Decoder.Decode(rec.Payload); err != nil {
				rep.Quarantined++
				rep.ByReason["quarantine: decode"]++
				continue
			}
			rep.countReason(&rec)
			rep.Delivered++
			rep.Bytes += uint64(len(rec.Payload))
		}
	}
}

// sideWriter is a segment the Restorer writes while restoring another:
// quarantined records, or the records a filtered pass leaves for later.
type sideWriter struct {
	sw SegmentWriter
	w  *segment.Writer
}

func newSideWriter(ctx context.Context, rd Reader, area Area, src segment.Header) (*sideWriter, error) {
	now := time.Now()
	hdr := segment.Header{Codec: segment.CodecZstd, DataVersion: src.DataVersion, Created: now, ID: segment.NewID(now)}
	if area == AreaReady {
		// The rest of a segment keeps its place in time.
		hdr.Created = src.Created
		hdr.ID = segment.NewID(src.Created)
	}
	name := segment.FileName(hdr.Created, hdr.ID)
	sw, err := rd.Create(ctx, area, name)
	if err != nil {
		return nil, fmt.Errorf("%w: create %s segment %s: %w", ErrSink, area, name, err)
	}
	w, err := segment.NewWriter(sw, hdr, nil)
	if err != nil {
		_ = sw.Abort()
		return nil, fmt.Errorf("%w: %s segment %s: %w", ErrSink, area, name, err)
	}
	return &sideWriter{sw: sw, w: w}, nil
}

func (w *sideWriter) commit(ctx context.Context) error {
	if err := w.w.Close(); err != nil {
		_ = w.sw.Abort()
		return fmt.Errorf("%w: %w", ErrSink, err)
	}
	if err := w.sw.Commit(ctx); err != nil {
		_ = w.sw.Abort()
		return fmt.Errorf("%w: %w", ErrSink, err)
	}
	return nil
}

// blockResult is a block read ahead, or the error reading it.
type blockResult struct {
	b    *segment.Block
	err  error
	free chan *segment.Block
}

func (br blockResult) release() { br.free <- br.b }

// prefetch reads and decodes blocks on its own goroutine, a few blocks ahead
// of delivery, so decompression overlaps delivery. stop ends it and waits.
func prefetch(sr *segment.Reader) (<-chan blockResult, func()) {
	const ahead = 2
	out := make(chan blockResult, ahead)
	free := make(chan *segment.Block, ahead+1)
	for range ahead + 1 {
		free <- new(segment.Block)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for {
			var b *segment.Block
			select {
			case b = <-free:
			case <-done:
				return
			}
			err := sr.ReadBlock(b)
			if err != nil {
				free <- b
				b = nil
			}
			select {
			case out <- blockResult{b: b, err: err, free: free}:
			case <-done:
				return
			}
			var ce *segment.CorruptError
			if err != nil && !errors.As(err, &ce) {
				return // io.EOF or an I/O error
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// session is a claim being worked on: it renews the lease in the background
// every Lease/3 and tells delivery when the lease can no longer be trusted.
type session struct {
	r      *Restorer
	claim  Claim
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex // serialises calls on claim
	cp        Checkpoint
	lastWrite time.Time
	ended     bool // released, completed or quarantined

	base    time.Time
	valid   atomic.Int64 // the lease is trusted until base+valid (monotonic)
	lost    atomic.Bool
	expired atomic.Bool // set by trust when base+valid passes
	trust   *time.Timer

	stopBeat chan struct{}
	beatDone chan struct{}
}

// leaseMargin is the part of a lease not trusted, for clock skew between
// restorers and the latency of renewing.
func leaseMargin(lease time.Duration) time.Duration { return lease / 5 }

func (r *Restorer) newSession(ctx context.Context, claim Claim) *session {
	ctx, cancel := context.WithCancel(ctx)
	s := &session{r: r, claim: claim, ctx: ctx, cancel: cancel, cp: claim.Checkpoint(),
		base: time.Now(), stopBeat: make(chan struct{}), beatDone: make(chan struct{})}
	s.lastWrite = s.base
	// The claim was taken just before base.
	s.valid.Store(int64(r.c.Lease - leaseMargin(r.c.Lease)))
	s.trust = time.AfterFunc(time.Duration(s.valid.Load()), func() { s.expired.Store(true) })
	go s.heartbeat()
	return s
}

func (s *session) heartbeat() {
	defer close(s.beatDone)
	t := time.NewTicker(s.r.c.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.stopBeat:
			return
		}
		s.mu.Lock()
		if !s.ended {
			if err := s.renewLocked(); err != nil && !errors.Is(err, ErrLeaseLost) {
				s.r.log.Warn("renewing a claim failed; retrying", slog.String("segment", s.claim.Name()), slog.Any("error", err))
			}
		}
		s.mu.Unlock()
		if s.lost.Load() {
			return
		}
	}
}

// renewLocked renews the lease with the current checkpoint.
func (s *session) renewLocked() error {
	start := time.Now()
	err := s.claim.Renew(s.ctx, s.cp)
	if err == nil {
		valid := start.Sub(s.base) + s.r.c.Lease - leaseMargin(s.r.c.Lease)
		s.valid.Store(int64(valid))
		s.trust.Stop()
		s.expired.Store(false)
		s.trust.Reset(valid - time.Since(s.base))
		s.lastWrite = start
		return nil
	}
	if errors.Is(err, ErrLeaseLost) {
		s.lost.Store(true)
		s.expired.Store(true)
		s.valid.Store(0)
		s.cancel()
		s.r.log.Warn("lost the claim on a segment; stopping it", slog.String("segment", s.claim.Name()))
	}
	return err
}

// hold returns nil while the lease can be trusted, renewing it first if it
// ran out; delivery calls it before every enqueue. A timer raises expired
// when the trusted time is over, so the common case reads one atomic; the
// clock is read again on the slow path.
func (s *session) hold() error {
	if !s.expired.Load() || time.Since(s.base) < time.Duration(s.valid.Load()) {
		return nil
	}
	if s.lost.Load() {
		return fmt.Errorf("%w: segment %s", ErrLeaseLost, s.claim.Name())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.base) < time.Duration(s.valid.Load()) {
		return nil
	}
	if err := s.renewLocked(); err != nil {
		return fmt.Errorf("%w: segment %s: renew: %w", ErrLeaseLost, s.claim.Name(), err)
	}
	return nil
}

// checkpoint records cp, writing it now unless the last write is younger
// than CheckpointInterval.
func (s *session) checkpoint(cp Checkpoint, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cp = cp
	if !force && time.Since(s.lastWrite) < s.r.c.CheckpointInterval {
		return nil
	}
	return s.renewLocked()
}

func (s *session) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.claim.Release(context.WithoutCancel(s.ctx))
}

func (s *session) complete(archive bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.claim.Complete(context.WithoutCancel(s.ctx), archive)
}

func (s *session) quarantine(reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.claim.Quarantine(context.WithoutCancel(s.ctx), reason)
}

func (s *session) close() {
	close(s.stopBeat)
	<-s.beatDone
	s.mu.Lock()
	s.trust.Stop()
	s.mu.Unlock()
	s.cancel()
}

// limiter paces events to a rate, sleeping only when more than a millisecond
// ahead so that it stays accurate at high rates.
type limiter struct {
	mu       sync.Mutex
	interval float64 // ns per event
	start    time.Time
	n        float64
}

func newLimiter(rate float64) *limiter {
	return &limiter{interval: float64(time.Second) / rate}
}

func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	now := time.Now()
	// After an idle spell, restart the schedule: no burst of saved-up events.
	if l.start.IsZero() || now.Sub(l.start.Add(time.Duration(l.n*l.interval))) > 100*time.Millisecond {
		l.start, l.n = now, 0
	}
	due := l.start.Add(time.Duration(l.n * l.interval))
	l.n++
	l.mu.Unlock()
	if d := due.Sub(now); d > time.Millisecond {
		return backoff.Sleep(ctx, d)
	}
	return ctx.Err()
}

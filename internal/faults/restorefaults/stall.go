package restorefaults

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// The stall enumeration (issue 30): every holder that finishes a segment on
// behalf of its claim — a restorer deleting, archiving or quarantining it,
// one applying its VersionPolicy, a prune expiring it — is paused past its
// lease between its last fencing write and its effect (the k-th call of the
// delete or move, for every k, before it and after it), while a restorer
// without faults, of the segments' version, takes its claims over and
// restores what it may; then the paused holder goes on, restorers without
// faults finish the store (the quarantine released and restored too), and
// the invariants are checked: no record delivered twice, every record
// delivered or accounted for (expired and counted once, deleted by the
// policy, or unreadable in a damaged block), the records that went through
// quarantine counted once, and nothing left in the store.

// Holder is one kind of holder the stall enumeration pauses.
type Holder struct {
	// Name names it in reports: "restore-delete", "prune", ...
	Name string
	// Ops are the operations of its effect: a point is the k-th call of
	// one of them.
	Ops []faults.Op

	segments []stallSegment
	halves   bool                    // the records carry a header "half", 0 or 1 alternately
	config   func(c *dlqdump.Config) // the holder's restorer, from the taker's
	run      func(ctx context.Context, r *dlqdump.Restorer) error
}

// stallSegment is a segment the scenario seeds.
type stallSegment struct {
	version dlqdump.Version
	damaged bool // its second block is damaged
}

var (
	stallV1 = dlqdump.NewVersion(1, 0, 0, 0)
	stallV2 = dlqdump.NewVersion(2, 0, 0, 0)
	// the deletes of a store: Discard on S3, Delete on a directory
	deleteOps = []faults.Op{faults.OpDelete, faults.OpDiscard}
)

func runPass(ctx context.Context, r *dlqdump.Restorer) error {
	_, err := r.Run(ctx, dlqdump.RunOptions{})
	return err
}

// Holders are the holders the enumeration pauses.
var Holders = []Holder{
	{Name: "restore-delete", Ops: deleteOps, segments: plainSegments(3), run: runPass},
	{Name: "restore-archive", Ops: []faults.Op{faults.OpMove}, segments: plainSegments(3), run: runPass,
		config: func(c *dlqdump.Config) { c.Archive = true }},
	{Name: "quarantine-damaged", Ops: []faults.Op{faults.OpMove}, run: runPass,
		segments: []stallSegment{{version: stallV1, damaged: true}, {version: stallV1}, {version: stallV1, damaged: true}}},
	{Name: "quarantine-version", Ops: []faults.Op{faults.OpMove}, segments: plainSegments(3), run: runPass,
		config: func(c *dlqdump.Config) { c.Version = stallV2 }},
	{Name: "delete-version", Ops: deleteOps, segments: plainSegments(3), run: runPass,
		config: func(c *dlqdump.Config) { c.Version, c.VersionPolicy = stallV2, dlqdump.VersionDelete }},
	// A carving pass (RunOptions.Carve) over half of each segment's
	// records: paused as it publishes a carved side segment (its move
	// out of the staging area, after the record decided it), and as it
	// finishes the side segments it restored; the taker restores
	// everything meanwhile.
	{Name: "carve", Ops: append([]faults.Op{faults.OpUnstage}, deleteOps...), segments: plainSegments(3), halves: true,
		run: func(ctx context.Context, r *dlqdump.Restorer) error {
			_, err := r.Run(ctx, dlqdump.RunOptions{Where: dlqdump.Headers{"half": "0"}, Carve: true})
			return err
		}},
	{Name: "prune", Ops: deleteOps, segments: plainSegments(3),
		config: func(c *dlqdump.Config) {
			c.Retention = dlqdump.Retention{Ready: dlqdump.Limits{MaxAge: time.Hour}}
		},
		run: func(ctx context.Context, r *dlqdump.Restorer) error {
			_, err := r.Prune(ctx, dlqdump.PruneOptions{})
			return err
		}},
}

func plainSegments(n int) []stallSegment {
	s := make([]stallSegment, n)
	for i := range s {
		s[i] = stallSegment{version: stallV1}
	}
	return s
}

// stallRecords is the number of records of each segment, in blocks of
// stallBlock raw bytes.
const (
	stallRecords = 120
	stallBlock   = 1 << 10
)

// stallSeeded is what a place was seeded with.
type stallSeeded struct {
	items    []string
	maxBlock int             // the most records in a block
	damaged  map[string]bool // the records of damaged blocks
	segOf    map[string]string
}

// seedStall writes h's segments into p, dated a day ago (so that a MaxAge
// of an hour expires them), oldest first.
func seedStall(p *Place, h *Holder) (*stallSeeded, error) {
	ctx := context.Background()
	sd := &stallSeeded{damaged: map[string]bool{}, segOf: map[string]string{}}
	base := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	for s, sg := range h.segments {
		created := base.Add(time.Duration(s) * time.Minute)
		id := segment.NewID(created)
		name := segment.FileName(created, id)
		var buf bytes.Buffer
		w, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecZstd, DataVersion: uint64(sg.version), Created: created, ID: id},
			&segment.WriterOptions{BlockSize: stallBlock})
		if err != nil {
			return nil, err
		}
		var items []string
		for i := range stallRecords {
			it := fmt.Sprintf("%s-%c%04d-%s", h.Name, 'a'+s, i, strings.Repeat("y", i%17))
			var hdrs map[string]string
			if h.halves {
				hdrs = map[string]string{"half": fmt.Sprint(i % 2)}
			}
			if err := w.Add(created, hdrs, []byte(it)); err != nil {
				return nil, err
			}
			items = append(items, it)
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		data := buf.Bytes()
		if r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), nil); err == nil && r.Footer() != nil {
			for _, b := range r.Footer().Blocks {
				sd.maxBlock = max(sd.maxBlock, int(b.Count))
			}
		}
		if sg.damaged {
			if err := damageBlock(data, name, 1, items, sd.damaged); err != nil {
				return nil, err
			}
		}
		sw, err := p.Reader.Create(ctx, sink.AreaReady, name)
		if err != nil {
			return nil, err
		}
		if _, err := sw.Write(data); err != nil {
			return nil, err
		}
		if err := sw.Commit(ctx); err != nil {
			return nil, err
		}
		for _, it := range items {
			sd.segOf[it] = name
		}
		sd.items = append(sd.items, items...)
	}
	return sd, nil
}

// damageBlock flips a byte of block b's stored bytes in data, a segment,
// and marks the records of that block in damaged.
func damageBlock(data []byte, name string, b int, items []string, damaged map[string]bool) error {
	r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Name: name})
	if err != nil {
		return err
	}
	ft := r.Footer()
	if ft == nil || len(ft.Blocks) <= b {
		return fmt.Errorf("segment %s has fewer than %d blocks", name, b+1)
	}
	blk := ft.Blocks[b]
	data[blk.Offset+segment.BlockHeaderSize+2] ^= 0x40
	for i := blk.FirstSeq; i < blk.FirstSeq+uint64(blk.Count); i++ {
		damaged[items[i]] = true
	}
	return nil
}

// stallMetrics sums what every restorer of a run reports.
type stallMetrics struct {
	dlqdump.NopMetrics
	restored                 atomic.Int64
	expired, expiredSegments atomic.Int64
	mu                       sync.Mutex
	quarantined              map[string]int64
}

func (m *stallMetrics) Restore(records, _ int) { m.restored.Add(int64(records)) }
func (m *stallMetrics) Expire(_, _ string, records int) {
	m.expired.Add(int64(records))
	m.expiredSegments.Add(1)
}
func (m *stallMetrics) Quarantine(reason string, records int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.quarantined == nil {
		m.quarantined = map[string]int64{}
	}
	m.quarantined[reason] += int64(records)
}

// StallHarness runs the stall enumeration on one store.
type StallHarness struct {
	// Store makes the place of each run. Required.
	Store Store
}

// Resume says when a paused holder goes on, relative to the restorer that
// takes its claims over.
type Resume uint8

// When a paused holder goes on.
const (
	// ResumeDrained: once the taker has restored all it may.
	ResumeDrained Resume = iota
	// ResumeAtOpen: as the taker first opens, moves or deletes the
	// segment the holder was finishing (it took the claim over), the
	// taker waiting until the holder's run ended.
	ResumeAtOpen
	// ResumeAtEffect: as the taker deletes or moves that segment.
	ResumeAtEffect
)

var resumeNames = [...]string{"taker-drained", "taker-opens", "taker-finishes"}

func (r Resume) String() string { return resumeNames[r] }

// AllResumes are every Resume.
var AllResumes = []Resume{ResumeDrained, ResumeAtOpen, ResumeAtEffect}

// StallSelection says which stalls RunStalls makes.
type StallSelection struct {
	// Modes are Pause (before the effect) and PauseAfter (after it).
	Modes []faults.Mode
	// Resumes are when the paused holder goes on (default all).
	Resumes []Resume
	// Ends, when set, takes only the first and the last call of each
	// operation (First: the first only); otherwise every call.
	Ends, First bool
	// Holders, when not empty, names the holders to run (by Name).
	Holders []string
}

// The stall selections of the tests and of cmd/dlqdump-reliability.
var (
	// StallsCI: the first and last effect of each holder, paused before,
	// going on at every Resume.
	StallsCI = StallSelection{Modes: []faults.Mode{faults.Pause}, Ends: true}
	// StallsEvery: every effect of each holder, paused before and after,
	// going on at every Resume.
	StallsEvery = StallSelection{Modes: []faults.Mode{faults.Pause, faults.PauseAfter}}
)

// StallReport counts what RunStalls ran.
type StallReport struct {
	Store string
	// Runs and Held count per holder.
	Runs, Held map[string]int
	// Failed are the runs that broke an invariant.
	Failed []*Result
	// Unreached counts the points whose run made fewer calls.
	Unreached int
}

// Total returns the runs and those held, over every holder.
func (r *StallReport) Total() (runs, held int) {
	for h, n := range r.Runs {
		runs += n
		held += r.Held[h]
	}
	return runs, held
}

// Summary is one line for logs and the reliability report.
func (r *StallReport) Summary() string {
	runs, held := r.Total()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d stall points, %d held, %d failed, %d not reached", r.Store, runs, held, len(r.Failed), r.Unreached)
	for _, h := range Holders {
		if n := r.Runs[h.Name]; n > 0 {
			fmt.Fprintf(&b, "; %s %d/%d", h.Name, r.Held[h.Name], n)
		}
	}
	return b.String()
}

// RunStalls runs each selected holder without fault to count its effects,
// then once for each stall point, calling each with every result.
func (h *StallHarness) RunStalls(ctx context.Context, sel StallSelection, each func(*Result)) (*StallReport, error) {
	rep := &StallReport{Store: h.Store.Name(), Runs: map[string]int{}, Held: map[string]int{}}
	for i := range Holders {
		hd := &Holders[i]
		if len(sel.Holders) > 0 && !contains(sel.Holders, hd.Name) {
			continue
		}
		base, calls, err := h.stallRun(ctx, hd, nil, ResumeDrained)
		if err != nil {
			return rep, err
		}
		if !base.Held() {
			rep.Failed = append(rep.Failed, base)
			if each != nil {
				each(base)
			}
		}
		for _, op := range hd.Ops {
			n := calls[op]
			var ks []int
			switch {
			case n == 0:
			case sel.Ends && n > 1 && !sel.First:
				ks = []int{1, n}
			case sel.Ends:
				ks = []int{1}
			default:
				for k := 1; k <= n; k++ {
					ks = append(ks, k)
				}
			}
			resumes := sel.Resumes
			if len(resumes) == 0 {
				resumes = AllResumes
			}
			for _, k := range ks {
				for _, m := range sel.Modes {
					for _, at := range resumes {
						pt := faults.Point{Op: op, K: k, Mode: m}
						start := time.Now()
						res, _, err := h.stallRun(ctx, hd, &pt, at)
						res.What += fmt.Sprintf(" [%s]", time.Since(start).Round(time.Millisecond))
						if err != nil {
							return rep, err
						}
						rep.Runs[hd.Name]++
						switch {
						case res.Held():
							rep.Held[hd.Name]++
						case res.Unexplored():
							rep.Unreached++
						default:
							rep.Failed = append(rep.Failed, res)
						}
						if each != nil {
							each(res)
						}
					}
				}
			}
		}
	}
	return rep, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// stallLease is the lease of every restorer of a stall run.
const stallLease = claimsLease

// stallRun runs hd once, paused at pt (nil: without fault) until at, and
// checks.
func (h *StallHarness) stallRun(ctx context.Context, hd *Holder, pt *faults.Point, at Resume) (*Result, faults.Counts, error) {
	p, err := h.Store.New()
	if err != nil {
		return nil, nil, err
	}
	sd, err := seedStall(p, hd)
	if err != nil {
		return nil, nil, err
	}
	res := &Result{What: hd.Name + " without fault", Reached: true}
	var in *faults.Injector
	if pt != nil {
		res.What, res.Reached = fmt.Sprintf("%s %s, resumed when the %s", hd.Name, pt, at), false
		in = faults.New(*pt)
	} else {
		in = faults.New()
	}
	dst := &destination{}
	mw := &stallMetrics{}
	takerCfg := func(rd sink.Reader, owner string) *dlqdump.Config {
		return &dlqdump.Config{Reader: rd, Decoder: decoder{}, Queue: dst, MetricsWriter: mw, Lease: stallLease, Owner: owner,
			Version: stallV1, MaxAttempts: 2, RetryBase: time.Millisecond, RetryMax: time.Millisecond}
	}
	var errs []string
	var takerWG sync.WaitGroup
	holderDone := make(chan struct{})
	in.OnFire = func(faults.Point) {
		takerWG.Add(1)
		go func() {
			defer takerWG.Done()
			defer in.Resume()
			rd := p.Reader
			if at != ResumeDrained {
				// The holder goes on as the taker touches the segment
				// it was finishing, and the taker waits for it.
				rd = resumeAt(p.Reader, finishing(p), at, func() {
					in.Resume()
					select {
					case <-holderDone:
					case <-time.After(jobDeadline):
					}
				})
			}
			if err := drain(ctx, takerCfg(rd, "taker"), p.Reader); err != nil {
				errs = append(errs, "the restorer taking over during the pause: "+err.Error())
			}
		}()
	}
	cfg := takerCfg(faults.WrapReader(p.Reader, in), "holder")
	if hd.config != nil {
		hd.config(cfg)
	}
	r, err := dlqdump.NewRestorer(cfg)
	if err != nil {
		return nil, nil, err
	}
	holderErr := hd.run(ctx, r)
	close(holderDone)
	takerWG.Wait()
	in.Resume()
	_ = r.Close()
	if pt != nil {
		res.Reached = len(in.Fired()) > 0
		res.Fewer = !res.Reached && in.Counts()[pt.Op] < pt.K
	} else if holderErr != nil {
		errs = append(errs, "the run without fault failed: "+holderErr.Error())
	}
	// Finish without faults: the ready area, then the quarantine
	// released and restored.
	if err := drain(ctx, takerCfg(p.Reader, "settle"), p.Reader); err != nil {
		errs = append(errs, "finishing without faults: "+err.Error())
	}
	before := len(dst.items())
	if err := release(ctx, takerCfg(p.Reader, "release"), p.Reader); err != nil {
		errs = append(errs, "releasing the quarantine: "+err.Error())
	}
	released := dst.items()[before:]
	res.Violations = append(errs, checkStall(p, hd, sd, dst.items(), released, mw)...)
	res.Bound = sd.maxBlock
	res.Duplicates = len(dst.items()) - distinct(dst.items())
	res.Segments = segmentsTwice(sd, dst.items())
	return res, in.Counts(), nil
}

// finishing returns the name of the segment whose record says that the
// paused holder is finishing it ("" if none).
func finishing(p *Place) string {
	ctx := context.Background()
	for name, err := range p.Reader.RecordNames(ctx) {
		if err != nil {
			return ""
		}
		data, _, err := p.Reader.ReadRecord(ctx, name)
		if err != nil {
			continue
		}
		if rec, ok := claims.Parse(data); ok && rec.Owner == "holder" && rec.State == claims.StateFinishing {
			return name
		}
	}
	return ""
}

// resumeAt returns the taker's store: its first open, move or delete of
// the segment name (with at ResumeAtEffect, its first move or delete)
// calls resume first.
func resumeAt(rd sink.Reader, name string, at Resume, resume func()) sink.Reader {
	var once sync.Once
	return &faults.Hooked{Reader: rd, Before: func(op string, _ sink.Area, n string) {
		if n == name && (op != "open" || at == ResumeAtOpen) {
			once.Do(resume)
		}
	}}
}

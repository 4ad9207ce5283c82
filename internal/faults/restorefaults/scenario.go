package restorefaults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// The scenario's data: three segments of small blocks.
const (
	segments                     = 3
	recordsA, recordsB, recordsC = 400, 240, 160
	blockSize                    = 2 << 10
	poison                       = "poison"  // does not decode
	refused                      = "refused" // the destination always refuses it
)

// Variant is a form of the scenario.
type Variant struct {
	// Encrypted seals the segments under a key of an age identity made
	// for the run, which the restorers hold.
	Encrypted bool
	// Jobs restores through restore jobs (package jobs) instead of
	// passes: a job selecting reason=failed, run by a jobs.Runner, then
	// a job of every record; their records in the store's table are
	// faulted too.
	Jobs bool
	// Act replays one record (a0077) and discards two (b0050, c0010) by
	// their IDs before the passes, as dlqdump replay and discard do: a
	// discard cut short is run again after the run, as its user would
	// (the command exits 1), and the discarded records must end in the
	// quarantine, never delivered.
	Act bool
	// Carve restores the records reason=failed with a carving pass
	// (RunOptions.Carve) before the pass over everything: it copies every
	// other record of b's out into a side segment of their own, releases
	// b and restores the side segment; it selects every record of a, so
	// it reads a again and delivers from it (nothing copied), and none of
	// c's.
	Carve bool
}

func (v Variant) String() string {
	s := "plain"
	if v.Encrypted {
		s = "encrypted"
	}
	if v.Jobs {
		s += ", jobs"
	}
	if v.Act {
		s += ", replay and discard"
	}
	if v.Carve {
		s += ", carve"
	}
	return s
}

// seedBase is when the scenario's first segment was created; the others a
// minute apart.
var seedBase = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// seeded is what Seed wrote: every record, the largest number of records in
// a block, and the identity that reads them (nil when not encrypted).
type seeded struct {
	items    []string
	maxBlock int
	identity string // an age identity, for a child process
	keys     segment.KeyUnwrapper
	act      bool // Variant.Act: some records are discarded
}

// Seed writes the scenario's segments into a place.
func Seed(p *Place, v Variant) (*seeded, error) {
	sd := &seeded{act: v.Act}
	var recipient envelope.Recipient
	if v.Encrypted {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return nil, err
		}
		sd.identity, recipient = id.String(), id.Recipient()
		sd.keys = envelope.NewKeyring(id)
	}
	base := seedBase
	segs := []struct {
		n      int
		reason func(i int) string
	}{
		{recordsA, func(int) string { return "failed" }},
		{recordsB, func(i int) string { return []string{"failed", "leak"}[i%2] }},
		{recordsC, func(int) string { return "leak" }},
	}
	ctx := ctxBackground()
	for s, sg := range segs {
		created := base.Add(time.Duration(s) * time.Minute)
		id := segment.NewID(created)
		sw, err := p.Reader.Create(ctx, sink.AreaReady, segment.FileName(created, id))
		if err != nil {
			return nil, err
		}
		// Act's segments carry summaries, as a Queue's do: its passes
		// by record ID read only the blocks that may hold one.
		opts := &segment.WriterOptions{BlockSize: blockSize, Summarize: v.Act}
		if recipient != nil {
			if opts.Key, err = envelope.NewDataKey(ctx, recipient); err != nil {
				return nil, err
			}
		}
		sw2, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, opts)
		if err != nil {
			return nil, err
		}
		for i := range sg.n {
			it := fmt.Sprintf("%c%04d-%s", 'a'+s, i, strings.Repeat("x", i%23))
			switch {
			case s == 0 && i == 150:
				it = poison + "-a150"
			case s == 1 && i == 100:
				it = refused + "-b100"
			}
			if err := sw2.Add(created.Add(time.Duration(i)*time.Millisecond), map[string]string{dlqdump.HeaderReason: sg.reason(i)}, []byte(it)); err != nil {
				return nil, err
			}
			sd.items = append(sd.items, it)
		}
		if err := sw2.Close(); err != nil {
			return nil, err
		}
		if err := sw.Commit(ctx); err != nil {
			return nil, err
		}
	}
	var err error
	sd.maxBlock, err = p.largestBlock(sink.AreaReady, sd.keys)
	return sd, err
}

func ctxBackground() context.Context { return context.Background() }

// identities returns the identities of an age identity string, none for "".
func identities(identity string) ([]envelope.Identity, error) {
	if identity == "" {
		return nil, nil
	}
	return envelope.ParseIdentities(strings.NewReader(identity))
}

// decoder decodes records as strings and fails on poisoned ones.
type decoder struct{}

func (decoder) Decode(b []byte) (any, error) {
	if strings.HasPrefix(string(b), poison) {
		return nil, errors.New("poisoned record")
	}
	return string(b), nil
}

// destination collects what it accepts; it always refuses refused records,
// and calls onAccept after each accepted one.
type destination struct {
	mu       sync.Mutex
	got      []string
	onAccept func(n int)
}

var errRefused = errors.New("the destination refuses this record")

func (d *destination) Enqueue(x any) error {
	s := x.(string)
	if strings.HasPrefix(s, refused) {
		return errRefused
	}
	d.mu.Lock()
	d.got = append(d.got, s)
	n := len(d.got)
	d.mu.Unlock()
	if d.onAccept != nil {
		d.onAccept(n)
	}
	return nil
}

func (d *destination) items() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// metrics counts what restorers report. Its methods are called by the
// segments in flight at once.
type metrics struct {
	dlqdump.NopMetrics
	restored, quarantined atomic.Int64
	mu                    sync.Mutex
	blocks                *[]int // when set, the deliveries so far at each Restore (under mu)
}

func (m *metrics) Restore(records, _ int) {
	n := m.restored.Add(int64(records))
	if m.blocks != nil {
		m.mu.Lock()
		*m.blocks = append(*m.blocks, int(n))
		m.mu.Unlock()
	}
}
func (m *metrics) Quarantine(_ string, records int) { m.quarantined.Add(int64(records)) }

// config returns the restorers' config over rd, with the identities that
// read an encrypted scenario.
func config(rd sink.Reader, dst *destination, mw *metrics, ids []envelope.Identity) *dlqdump.Config {
	c := &dlqdump.Config{
		Reader:        rd,
		Decoder:       decoder{},
		Queue:         dst,
		MetricsWriter: mw,
		Archive:       true,
		MaxAttempts:   2,
		RetryBase:     time.Millisecond,
		RetryMax:      time.Millisecond,
		Lease:         claimsLease,
		Owner:         "restorefaults",
	}
	if ids != nil {
		c.Encryption = &dlqdump.Encryption{Identities: ids}
	}
	return c
}

// claimsLease is the lease of the scenario's restorers: a claim left by a
// run that failed or died is taken over that long after it is first seen.
const claimsLease = 150 * time.Millisecond

// drive runs the scenario with r over rd: two passes, filtered on
// reason=failed, then every record; or, with jobs, the same as two restore
// jobs run one after the other (w, when not nil, watches the requests a
// control run makes of them). It returns the first error.
func drive(ctx context.Context, v Variant, rd sink.Reader, r *dlqdump.Restorer, w *controlWatch) error {
	if v.Act {
		// A replay or discard that fails is run again before anything
		// else (finish does), as its user would.
		if err := act(ctx, rd, r, true); err != nil {
			return err
		}
	}
	if !v.Jobs {
		_, err1 := r.Run(ctx, dlqdump.RunOptions{Where: dlqdump.Headers{dlqdump.HeaderReason: "failed"}, Carve: v.Carve})
		_, err2 := r.Run(ctx, dlqdump.RunOptions{})
		return errors.Join(err1, err2)
	}
	return runJobs(ctx, rd, r, w)
}

// The records the Act variant replays and discards: segment (0 for a, 1 for
// b, 2 for c) and sequence number.
var (
	replayed  = [2]int{0, 77}
	discarded = [][2]int{{1, 50}, {2, 10}}
)

// isDiscarded reports whether item is one of the records the Act variant
// discards.
func isDiscarded(item string) bool {
	for _, d := range discarded {
		if strings.HasPrefix(item, fmt.Sprintf("%c%04d-", 'a'+d[0], d[1])) {
			return true
		}
	}
	return false
}

// act replays the Act variant's record (with replay) and discards its two,
// by their IDs.
func act(ctx context.Context, rd sink.Reader, r *dlqdump.Restorer, replay bool) error {
	if replay {
		ids, err := idsOf(ctx, rd, replayed)
		if err != nil {
			return err
		}
		if _, err := r.Run(ctx, dlqdump.RunOptions{Select: selection.IDs(ids...)}); err != nil {
			return err
		}
	}
	ids, err := idsOf(ctx, rd, discarded...)
	if err != nil {
		return err
	}
	_, err = r.Run(ctx, dlqdump.RunOptions{Select: selection.IDs(ids...), Discard: "by restorefaults: poison"})
	return err
}

// idsOf returns the IDs of records by segment and sequence number: the
// segment's origin is read from its header in the ready area (the IDs a
// user copies from dlqdump cat). A segment no longer ready gives none.
func idsOf(ctx context.Context, rd sink.Reader, recs ...[2]int) ([]segment.RecordID, error) {
	var ids []segment.RecordID
	for si, err := range rd.List(ctx, sink.AreaReady) {
		if err != nil {
			return nil, err
		}
		t, ok := segment.ParseFileName(si.Name)
		if !ok {
			continue
		}
		for _, rc := range recs {
			if !t.Equal(seedBase.Add(time.Duration(rc[0]) * time.Minute)) {
				continue
			}
			f, err := rd.Open(ctx, sink.AreaReady, si.Name)
			if err != nil {
				return nil, err
			}
			sr, err := segment.NewReaderContext(ctx, f, f.Size(), &segment.ReaderOptions{Name: si.Name})
			if err != nil {
				f.Close()
				return nil, err
			}
			hdr := sr.Header()
			f.Close()
			ids = append(ids, hdr.RecordID(&segment.Record{Seq: uint64(rc[1])}))
		}
	}
	return ids, nil
}

// jobSpecs are the scenario's jobs, created (idempotently) one after the
// other.
var jobSpecs = []jobs.Spec{
	{ID: "failed", Where: map[string]string{dlqdump.HeaderReason: "failed"}},
	{ID: "all"},
}

// runJobs creates each job (one that ended already is left so) and runs it
// with a runner on r, until it has ended (or a job deadline); w, when not
// nil, is told of the jobs paused or cancelled, and resumes the paused.
func runJobs(ctx context.Context, rd sink.Reader, r *dlqdump.Restorer, w *controlWatch) error {
	st, err := jobs.Open(rd)
	if err != nil {
		return err
	}
	rn, err := jobs.NewRunner(st, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Owner: "restorefaults-runner", Lease: claimsLease,
		PollInterval: 10 * time.Millisecond, RetryBase: 5 * time.Millisecond})
	if err != nil {
		return err
	}
	if err := rn.Start(); err != nil {
		return err
	}
	defer rn.Close()
	for _, spec := range jobSpecs {
		j, err := st.Create(ctx, spec)
		if errors.Is(err, jobs.ErrFinished) && (j.State == jobs.Completed || j.State == jobs.Cancelled && w.cancelled(j.ID)) {
			continue // ran before
		}
		if err != nil {
			return err
		}
		if err := waitEnded(ctx, st, spec.ID, w); err != nil {
			return err
		}
	}
	return nil
}

// jobDeadline bounds the wait for a job of the scenario: far above the few
// leases and retries a faulted run needs.
const jobDeadline = 30 * time.Second

// waitEnded waits until job id has ended, and returns an error unless it
// completed or, asked so (w), was cancelled. A job paused as asked is
// resumed.
func waitEnded(ctx context.Context, st *jobs.Store, id string, w *controlWatch) error {
	ctx, cancel := context.WithTimeout(ctx, jobDeadline)
	defer cancel()
	for {
		j, err := st.Get(ctx, id)
		switch {
		case err == nil && j.State == jobs.Completed:
			return nil
		case err == nil && j.State == jobs.Cancelled && w.cancelled(id):
			return nil
		case err == nil && j.State.Final():
			return fmt.Errorf("job %s %s: %s", id, j.State, j.Error)
		case err == nil && j.State == jobs.Paused && w != nil:
			if err := w.paused(ctx, st, &j); err != nil {
				return err
			}
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("job %s not ended: %w (last: %+v, %v)", id, ctx.Err(), j, err)
		}
	}
}

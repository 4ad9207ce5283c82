// Package claims is dlqdump's one claim protocol: a lease on a ready segment,
// kept in the segment's record (sink.Records) and changed only by
// compare-and-swap, so that any number of restorers, in one process or many,
// on one host or many, never work on one segment at once. The Restorer and
// the dlqdump command both use it; sinks only store the bytes.
//
// A claim is identified by a random token, never by its owner's name, so two
// restorers sharing a name never take each other's live claims. Expiry is
// judged without comparing clocks across machines: an observer that sees a
// held record unchanged (same version) for the holder's lease, measured by
// its own monotonic clock from when it first saw that version, may take the
// claim over; the holder renews every third of the lease and trusts its claim
// only until its last successful write started plus the lease less a margin
// (a fifth), so it stops before anyone can take over, whatever the clocks
// say, as long as they run at about the same rate.
package claims

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Errors of the claim protocol; package dlqdump re-exports them.
var (
	// ErrClaimed means another restorer holds a live claim on the segment.
	ErrClaimed = errors.New("dlqdump: segment claimed by another restorer")
	// ErrLeaseLost means the claim was taken over (or its record removed):
	// the former holder must stop working on the segment at once.
	ErrLeaseLost = errors.New("dlqdump: segment lease lost")
)

// MinLease and MaxLease bound the lease a Claimer takes claims with. An
// observer honours at most MaxLease of a record's lease, so that a damaged
// or hostile record cannot hold a segment for ever; no holder renews less
// often than that.
const (
	MinLease = 100 * time.Millisecond
	MaxLease = time.Hour
)

// Claimer takes claims on the ready segments of a store for one owner. It
// remembers, per segment claimed by others, the version it last saw and since
// when, to tell a dead holder's claim from a live one. It is safe for
// concurrent use.
type Claimer struct {
	store sink.Reader  // the segments' store; nil for records of another kind
	recs  sink.Records // where the records are
	owner string
	lease time.Duration
	now   func() time.Time
	log   *slog.Logger

	mu   sync.Mutex
	seen map[string]observation
}

type observation struct {
	version string
	since   time.Time // first seen with this version
	looked  time.Time // last looked at
}

// Options tune a Claimer.
type Options struct {
	// Now returns the current time with a monotonic reading; tests give a
	// fake clock. Default time.Now.
	Now func() time.Time
	// Logger receives warnings about damaged records. Default: discard.
	Logger *slog.Logger
}

// NewClaimer returns a Claimer taking claims for owner (a label for people)
// with the given lease.
func NewClaimer(store sink.Reader, owner string, lease time.Duration, opts *Options) (*Claimer, error) {
	c, err := NewRecordClaimer(store, owner, lease, opts)
	if err != nil {
		return nil, err
	}
	c.store = store
	return c, nil
}

// NewRecordClaimer returns a Claimer of records that are not segments' (a
// restore job's, package jobs): Claim, Keep, Save, Release and Forget work
// on them as on segments' records; what moves segments (Finish, Publish,
// Reserve, Sweep) must not be called.
func NewRecordClaimer(recs sink.Records, owner string, lease time.Duration, opts *Options) (*Claimer, error) {
	if lease < MinLease || lease > MaxLease {
		return nil, fmt.Errorf("%w: Lease: %s is outside %s to %s", sink.ErrConfig, lease, MinLease, MaxLease)
	}
	c := &Claimer{recs: recs, owner: owner, lease: lease, now: time.Now, log: slog.New(slog.DiscardHandler), seen: map[string]observation{}}
	if opts != nil && opts.Now != nil {
		c.now = opts.Now
	}
	if opts != nil && opts.Logger != nil {
		c.log = opts.Logger
	}
	return c, nil
}

// Lease returns the Claimer's lease.
func (c *Claimer) Lease() time.Duration { return c.lease }

// Owner returns the Claimer's owner label.
func (c *Claimer) Owner() string { return c.owner }

// Claim takes the claim on a ready segment. A segment without a record, or
// whose claim was released, is taken at once; a held one only once this
// Claimer has seen its record unchanged for the holder's lease (until then
// ErrClaimed, and the observation goes on with the next call). The claim
// keeps the progress the previous holder saved.
//
// Claim does not check that the segment exists: the caller opens it and, if
// it is gone, calls Forget on the claim.
//
// A record whose holder had decided to finish the segment (it stopped past
// its lease, or released the claim after deciding) is not the caller's to
// work on: Claim completes that finish and returns a *Finished.
func (c *Claimer) Claim(ctx context.Context, name string) (*Claim, error) {
	return c.claimFrom(ctx, name, nil)
}

// claimFrom is Claim whose first decision is on read, the record as a
// failed write just read it, when not nil: a lost claim costs that read,
// not a second one.
func (c *Claimer) claimFrom(ctx context.Context, name string, read *readRecord) (*Claim, error) {
	for attempt := 0; ; attempt++ {
		var (
			cl  *Claim
			err error
		)
		if read != nil {
			cl, err = c.tryRead(ctx, name, *read)
			read = nil
		} else {
			cl, err = c.try(ctx, name)
		}
		var again *retryRead
		if errors.As(err, &again) {
			read = &again.read
		}
		if !errors.Is(err, errRetry) || attempt >= 2 {
			if errors.Is(err, errRetry) {
				err = fmt.Errorf("%w: segment %s: its record kept changing", ErrClaimed, name)
			}
			return cl, err
		}
	}
}

var errRetry = errors.New("retry")

// readRecord is a record as ReadRecord returned it.
type readRecord struct {
	data    []byte
	version string
	err     error
}

// retryRead is errRetry with the record the failed write read: the next
// attempt decides on it instead of reading it again.
type retryRead struct{ read readRecord }

func (*retryRead) Error() string { return errRetry.Error() }
func (*retryRead) Unwrap() error { return errRetry }

// Check tells what Claim would do now, without writing anything: the error
// Claim would fail with (ErrClaimed for a live claim, ...), or the progress
// Claim would take over and whether the segment was quarantined before. A
// dry run decides with it what the run decides with Claim.
//
// For a record whose holder decided a finish that a claim would complete,
// the error is a *Finished (Pending).
func (c *Claimer) Check(ctx context.Context, name string) (progress json.RawMessage, quarantined bool, err error) {
	prev, _, err := c.decide(ctx, name)
	if to := decided(&prev); err == nil && to != nil {
		err = &Finished{Name: name, Owner: prev.Owner, To: *to, Progress: prev.Progress, Pending: true}
	}
	return prev.Progress, prev.State == StateQuarantined, err
}

func (c *Claimer) try(ctx context.Context, name string) (*Claim, error) {
	data, version, err := c.recs.ReadRecord(ctx, name)
	return c.tryRead(ctx, name, readRecord{data, version, err})
}

// tryRead is try deciding on the record as read.
func (c *Claimer) tryRead(ctx context.Context, name string, read readRecord) (*Claim, error) {
	prev, version, err := c.decideOn(ctx, name, read.data, read.version, read.err)
	if err != nil {
		return nil, err
	}
	return c.take(ctx, name, prev, version)
}

// decide reads the record of name and tells whether it may be claimed now:
// the record to take over (zero if none) and its version ("" if none).
func (c *Claimer) decide(ctx context.Context, name string) (prev Record, version string, err error) {
	data, version, err := c.recs.ReadRecord(ctx, name)
	return c.decideOn(ctx, name, data, version, err)
}

// decideOn is decide on the record as ReadRecord returned it.
func (c *Claimer) decideOn(ctx context.Context, name string, data []byte, version string, err error) (prev Record, _ string, _ error) {
	switch {
	case errors.Is(err, sink.ErrNotFound):
		version = ""
	case err != nil:
		return prev, "", fmt.Errorf("dlqdump: claim %s: read record: %w", name, err)
	default:
		rec, ok := Parse(data)
		if !ok {
			// Treat it as a live claim of unknown lease: observed like
			// any other, taken over once it stays unchanged.
			c.log.Warn("a segment's claim record is damaged; it is taken over once unchanged for a lease", slog.String("segment", name))
			rec = Record{V: Version, Token: "damaged", LeaseMS: c.lease.Milliseconds()}
		}
		if rec.Held() && !c.expired(name, version, rec.Lease(c.lease)) {
			return prev, "", fmt.Errorf("%w: segment %s is held by %q (seen live within its lease of %s)", ErrClaimed, name, rec.Owner, min(rec.Lease(c.lease), MaxLease))
		}
		if !rec.Held() && rec.State == StateQuarantined {
			// Claimable once released into the ready area, not before:
			// a listing made before its holder moved it to quarantine
			// must not take (and then drop) the record holding its
			// progress.
			if ready, err := c.present(ctx, sink.AreaReady, name); err != nil || !ready {
				if err == nil {
					err = fmt.Errorf("%w: segment %s is in quarantine", sink.ErrNotFound, name)
				}
				return prev, "", err
			}
		}
		if !rec.Held() && rec.State == StatePending {
			if free, err := c.sideFree(ctx, name, &rec); err != nil || !free {
				if err == nil {
					err = fmt.Errorf("%w: segment %s holds records set aside from %s, which may still publish it", ErrClaimed, name, rec.Parent)
				}
				return prev, "", err
			}
			rec.State, rec.Parent, rec.Named = StateOpen, "", false
		}
		prev = rec
	}
	return prev, version, nil
}

// ClaimNew is Claim for a segment that had no record when it was listed: it
// creates the record (one request, where Claim reads before it writes). A
// record there already (another restorer's claim taken since the listing,
// or the progress of a segment released from quarantine since) is decided
// on as Claim decides: a live claim is ErrClaimed, a released one is taken
// over with its progress.
func (c *Claimer) ClaimNew(ctx context.Context, name string) (*Claim, error) {
	cl, err := c.take(ctx, name, Record{}, "")
	if errors.Is(err, errRetry) {
		var again *retryRead
		if errors.As(err, &again) {
			return c.claimFrom(ctx, name, &again.read)
		}
		return c.Claim(ctx, name)
	}
	return cl, err
}

// take writes a new claim's record over prev, the record read at version
// ("": none).
func (c *Claimer) take(ctx context.Context, name string, prev Record, version string) (*Claim, error) {
	rec := Record{V: Version, Owner: c.owner, Token: newToken(), Rev: prev.Rev + 1, LeaseMS: c.lease.Milliseconds(),
		Written: time.Now().UTC(), Progress: prev.Progress, Publishing: prev.Publishing, Control: prev.Control}
	if to := decided(&prev); to != nil {
		// The previous holder decided to finish it: the claim completes
		// that, fenced by this write (see Finished).
		rec.State, rec.To = StateFinishing, to
	}
	start := c.now()
	b := rec.marshal()
	newVersion, err := c.recs.WriteRecord(ctx, name, b, version)
	if err != nil {
		// The write may have happened though it reported failure: then
		// the record holds our token.
		cur, curVersion, rerr := c.recs.ReadRecord(ctx, name)
		if rerr != nil || string(cur) != string(b) {
			if errors.Is(err, sink.ErrConflict) {
				// Another wrote it first: the next attempt decides on
				// what was just read (a read failure other than a
				// missing record is read again).
				if rerr == nil || errors.Is(rerr, sink.ErrNotFound) {
					return nil, &retryRead{readRecord{cur, curVersion, rerr}}
				}
				return nil, errRetry
			}
			return nil, fmt.Errorf("dlqdump: claim %s: write record: %w", name, err)
		}
		newVersion = curVersion
	}
	c.forget(name)
	cl := &Claim{c: c, name: name, rec: rec, token: rec.Token, version: newVersion, found: prev.Progress, state: prev.State, trusted: start,
		had: version != "", prevOwner: prev.Owner}
	if rec.To != nil {
		return nil, cl.complete(ctx, prev)
	}
	if len(rec.Publishing) > 0 {
		// The previous holder decided to publish these: move them into
		// place now (what fails is tried again by Finish).
		cl.mu.Lock()
		if err := cl.settleLocked(ctx); err != nil {
			c.log.Warn("publishing what the previous holder of a claim decided failed; retried before the segment is finished", slog.String("segment", name), slog.Any("error", err))
		}
		cl.mu.Unlock()
	}
	return cl, nil
}

// expired reports whether the held record of name, at version, has been seen
// unchanged for lease, and records the observation.
func (c *Claimer) expired(name, version string, lease time.Duration) bool {
	lease = min(lease, MaxLease)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.seen[name]
	if !ok || o.version != version {
		c.seen[name] = observation{version: version, since: now, looked: now}
		c.pruneLocked(now)
		return false
	}
	o.looked = now
	c.seen[name] = o
	return now.Sub(o.since) >= lease
}

// pruneLocked drops observations not looked at for an hour, so that the
// segments other restorers finished do not accumulate.
func (c *Claimer) pruneLocked(now time.Time) {
	if len(c.seen) < 256 {
		return
	}
	for n, o := range c.seen {
		if now.Sub(o.looked) > MaxLease {
			delete(c.seen, n)
		}
	}
}

func (c *Claimer) forget(name string) {
	c.mu.Lock()
	delete(c.seen, name)
	c.mu.Unlock()
}

// present reports whether a segment is in area.
func (c *Claimer) present(ctx context.Context, area sink.Area, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	return sink.Exists(ctx, c.store, area, name)
}

// sideFree reports whether the pending record rec of the side segment name
// lets it be claimed. A side Reserved (not Named) is free once its parent is
// no longer ready. A Named side is free once its parent's progress does not
// name it (Progress.Writing): the parent's runs that it holds are no longer
// listed there, so nothing publishes it again. That holds wherever the
// parent is: a parent quarantined whole mid-carve keeps its progress, and,
// released, would carve and publish the same records again. A parent with
// no record (finished, or never saved) names none.
func (c *Claimer) sideFree(ctx context.Context, name string, rec *Record) (bool, error) {
	if !rec.Named {
		ready, err := c.present(ctx, sink.AreaReady, rec.Parent)
		return err == nil && !ready, err
	}
	data, _, err := c.recs.ReadRecord(ctx, rec.Parent)
	if errors.Is(err, sink.ErrNotFound) {
		return true, nil // no progress: none names it
	}
	if err != nil {
		return false, fmt.Errorf("dlqdump: claim %s: read the record of its parent %s: %w", name, rec.Parent, err)
	}
	parent, ok := Parse(data)
	if !ok {
		return false, nil // damaged: it may name it
	}
	p, err := ParseProgress(parent.Progress)
	if err != nil {
		return false, nil
	}
	return !slices.Contains(p.Writing, name), nil
}

// Reserve makes the record of a side segment, name, before it is published:
// pending until parent (the segment whose records it holds) is no longer
// ready. A record already there (an earlier attempt's) is left as it is.
func (c *Claimer) Reserve(ctx context.Context, name, parent string) error {
	return c.reserve(ctx, name, parent, false)
}

// ReserveNamed is Reserve for a side segment that the parent's progress
// names while it may publish it again (Progress.Writing, saved before):
// pending until the parent is no longer ready or its progress no longer
// names it, so that a side segment carved from a segment that stays ready
// is restored at once.
func (c *Claimer) ReserveNamed(ctx context.Context, name, parent string) error {
	return c.reserve(ctx, name, parent, true)
}

func (c *Claimer) reserve(ctx context.Context, name, parent string, named bool) error {
	rec := Record{V: Version, Rev: 1, State: StatePending, Parent: parent, Named: named, Written: time.Now().UTC()}
	_, err := c.recs.WriteRecord(ctx, name, rec.marshal(), "")
	if err == nil || errors.Is(err, sink.ErrConflict) {
		return nil
	}
	// Failed, or took effect and reported failure: the record tells.
	if _, _, rerr := c.recs.ReadRecord(ctx, name); rerr == nil {
		return nil
	}
	return fmt.Errorf("dlqdump: reserve side segment %s: %w", name, err)
}

// Sweep removes the record of a segment that is not ready and, unless it is
// a side segment's record whose parent is done, not quarantined either (a
// restorer that finished it failed to remove the record, or died first),
// unless the record is held by a live claim or is a side segment's,
// reserved while its parent is ready. It returns the record it removed, nil
// if it removed none: one in StateFinishing is that of a segment whose
// holder finished moving or deleting it and stopped before removing its
// record (its progress's counts are to be reported once, here).
func (c *Claimer) Sweep(ctx context.Context, name string) (*Record, error) {
	data, version, err := c.recs.ReadRecord(ctx, name)
	if errors.Is(err, sink.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	areas := []sink.Area{sink.AreaReady, sink.AreaQuarantine}
	rec, parsed := Parse(data)
	if parsed {
		if rec.Held() && !c.expired(name, version, rec.Lease(c.lease)) {
			return nil, nil
		}
		if rec.Staged != "" {
			// A copy from another store, staged until its command
			// moves it into place.
			if staged, err := c.present(ctx, sink.AreaStaging, rec.Staged); err != nil || staged {
				return nil, err
			}
		}
		if rec.State == StatePending {
			if ready, err := c.present(ctx, sink.AreaReady, rec.Parent); err != nil || ready {
				return nil, err
			}
			// Its parent is done: a quarantined side segment needs its
			// record no more.
			areas = areas[:1]
		}
	}
	// Ready last too: a segment released from quarantine between the two
	// looks is found by the third (a move is one rename, or a copy before
	// a delete, so a segment moved once is always in one of the places).
	for _, a := range append(areas, sink.AreaReady) {
		if there, err := c.present(ctx, a, name); err != nil || there {
			return nil, err
		}
	}
	err = c.recs.DeleteRecord(ctx, name, version)
	if errors.Is(err, sink.ErrConflict) || errors.Is(err, sink.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.forget(name)
	if !parsed {
		rec = Record{Owner: "(damaged record)"}
	}
	return &rec, nil
}

// Inspect reads the record of a segment without claiming it: nil when there
// is none. live tells whether it is held and, as far as this Claimer has
// seen, not expired (a held record seen for the first time counts as live).
func (c *Claimer) Inspect(ctx context.Context, name string) (rec *Record, live bool, err error) {
	s, err := c.Look(ctx, name)
	return s.Record, s.Live, err
}

// Seen is a record as Look read it, to be claimed at that version by
// ClaimSeen.
type Seen struct {
	Name string
	// Record is the record read, nil when there is none.
	Record *Record
	// Live tells whether it is held and, as far as the Claimer has seen,
	// not expired (a held record seen for the first time counts as live).
	Live    bool
	version string
}

// Look is Inspect, keeping what ClaimSeen needs: a look and a claim cost
// two requests, where Inspect and Claim cost three.
func (c *Claimer) Look(ctx context.Context, name string) (Seen, error) {
	data, version, err := c.recs.ReadRecord(ctx, name)
	if errors.Is(err, sink.ErrNotFound) {
		return Seen{Name: name}, nil
	}
	if err != nil {
		return Seen{Name: name}, err
	}
	r, ok := Parse(data)
	if !ok {
		r = Record{V: Version, Owner: "(damaged record)", Token: "damaged", LeaseMS: c.lease.Milliseconds()}
	}
	s := Seen{Name: name, Record: &r, version: version}
	if r.Held() {
		s.Live = !c.expired(name, version, r.Lease(c.lease))
	}
	return s, nil
}

// ClaimSeen takes the claim on the record Look saw, if it has not changed
// since, writing progress into it in the same request (nil: the progress it
// holds). A record seen live, or changed since (another holder took it, a
// request was written into it), is ErrClaimed: look again. A segment's
// record in a state Claim decides on with more reads (quarantined, pending)
// is claimed as Claim does.
func (c *Claimer) ClaimSeen(ctx context.Context, s Seen, progress json.RawMessage) (*Claim, error) {
	var prev Record
	if s.Record != nil {
		if s.Live {
			return nil, fmt.Errorf("%w: %s is held by %q", ErrClaimed, s.Name, s.Record.Owner)
		}
		prev = *s.Record
		if !prev.Held() && (prev.State == StateQuarantined || prev.State == StatePending) {
			return c.Claim(ctx, s.Name)
		}
	}
	if progress != nil {
		prev.Progress = progress
	}
	cl, err := c.take(ctx, s.Name, prev, s.version)
	if errors.Is(err, errRetry) {
		return nil, fmt.Errorf("%w: %s changed since it was looked at", ErrClaimed, s.Name)
	}
	return cl, err
}

package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// RestorerStats describe a Restorer and its store.
type RestorerStats struct {
	// Ready, Claimed and Quarantined count segments: ready to restore (of
	// which Claimed are held by a live claim, this restorer's or
	// another's) and quarantined. They are refreshed by every pass and,
	// once Start was called, every CheckInterval.
	Ready, Claimed, Quarantined int
	// OldestReady is the age of the oldest ready segment's first record,
	// 0 when none is ready; refreshed like Ready.
	OldestReady time.Duration
	// Refreshed is when the counts above were taken; zero before the
	// first refresh.
	Refreshed time.Time
	// Missing says that the Reader's location does not exist (an
	// fs.Reader's Directory: a typo, or no Queue has written there yet, see
	// sink.Locator): there is nothing to restore, and Run returns an error
	// wrapping ErrNotFound that names it. Refreshed like Ready.
	Missing bool
	// Restored, Retried and QuarantinedRecords count records since start.
	Restored, Retried, QuarantinedRecords uint64
	// Bytes counts payload bytes restored since start.
	Bytes uint64
	// LastError is the last error a pass or a refresh met, nil if none.
	LastError error
}

// storeStatus is what a refresh found.
type storeStatus struct {
	missing              error // the Reader's location does not exist (sink.Locator)
	readyNames           []string
	recorded             map[string]bool // ready segments that had a record
	live                 map[string]bool // of those, the ones held by a live claim
	orphans              []string        // records of segments neither ready nor quarantined
	ready, claimed, quar int
	oldest               time.Duration
	at                   time.Time
}

// refresh lists the store and updates the status and the gauges.
func (r *Restorer) refresh(ctx context.Context) (*storeStatus, error) {
	st := &storeStatus{}
	now := time.Now()
	if l, ok := r.c.Reader.(sink.Locator); ok {
		if err := l.Locate(ctx); errors.Is(err, sink.ErrNotFound) {
			st.missing, st.at = err, now
			r.status.Store(st)
			r.mw.Source(0, 0, 0, 0)
			return st, nil
		} else if err != nil {
			return nil, fmt.Errorf("dlqdump: locate the store: %w", err)
		}
	}
	// The three listings at once, and the ready segments' records read
	// SegmentsInFlight at once: on a distant store a refresh costs a few
	// round trips, not one per listing and per claim of the other
	// restorers (it starts and ends every pass).
	var records, quarantined []string
	var errs [3]error
	var wg sync.WaitGroup
	wg.Go(func() { st.readyNames, errs[0] = listNames(ctx, r.c.Reader, sink.AreaReady) })
	wg.Go(func() {
		for name, err := range r.c.Reader.RecordNames(ctx) {
			if err != nil {
				errs[1] = err
				return
			}
			records = append(records, name)
		}
	})
	wg.Go(func() { quarantined, errs[2] = listNames(ctx, r.c.Reader, sink.AreaQuarantine) })
	wg.Wait()
	for i, what := range []string{"list ready segments", "list claims", "list quarantined segments"} {
		if errs[i] != nil {
			return nil, fmt.Errorf("dlqdump: %s: %w", what, errs[i])
		}
	}
	// Listings are sorted: a record's segment is looked up in the names,
	// not in a map of them (a million segments would make a map of a
	// million for every refresh).
	if !slices.IsSorted(st.readyNames) {
		slices.Sort(st.readyNames)
	}
	var others, held []string
	for _, name := range records {
		if _, ready := slices.BinarySearch(st.readyNames, name); !ready {
			others = append(others, name)
			continue
		}
		if st.recorded == nil {
			st.recorded = map[string]bool{}
		}
		st.recorded[name] = true
		held = append(held, name)
	}
	st.live = r.live(ctx, held)
	st.claimed = len(st.live)
	quar := make(map[string]bool, len(quarantined))
	for _, name := range quarantined {
		quar[name] = true
	}
	st.quar = len(quarantined)
	for _, name := range others {
		// A quarantined segment's record (its progress, or a side
		// segment's pending record) stays while it is there.
		if !quar[name] {
			st.orphans = append(st.orphans, name)
		}
	}
	st.ready = len(st.readyNames)
	if st.ready > 0 {
		if t, ok := segment.ParseFileName(st.readyNames[0]); ok {
			st.oldest = max(now.Sub(t), 0)
		}
	}
	st.at = now
	r.status.Store(st)
	r.mw.Source(st.ready, st.claimed, st.quar, st.oldest)
	return st, nil
}

// listNames returns the names of an area's segments.
func listNames(ctx context.Context, rd sink.Reader, area sink.Area) ([]string, error) {
	var out []string
	for name, err := range sink.Names(ctx, rd, area) {
		if err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}

// live returns those of names whose record holds a live claim (Inspect:
// reading a record observes it, so that a claim left unchanged for its
// lease is taken over).
func (r *Restorer) live(ctx context.Context, names []string) map[string]bool {
	var mu sync.Mutex
	live := map[string]bool{}
	r.each(names, func(name string) {
		if _, ok, err := r.claimer.Inspect(ctx, name); err == nil && ok {
			mu.Lock()
			live[name] = true
			mu.Unlock()
		}
	})
	return live
}

// each calls fn for each of names, SegmentsInFlight at once: the requests
// about many records overlap their round trips.
func (r *Restorer) each(names []string, fn func(name string)) {
	next := make(chan string)
	var wg sync.WaitGroup
	for range min(len(names), r.c.SegmentsInFlight) {
		wg.Go(func() {
			for name := range next {
				fn(name)
			}
		})
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()
}

// statusLoop refreshes the status every CheckInterval until ctx ends.
func (r *Restorer) statusLoop(ctx context.Context) {
	defer r.bgWG.Done()
	t := time.NewTicker(r.c.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if st := r.status.Load(); time.Since(st.at) < r.c.CheckInterval {
			continue // a pass refreshed it just now
		}
		if _, err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			r.setErr(err)
			r.log.Warn("refreshing the store's status failed", slog.Any("error", err))
		}
	}
}

// Stats returns the Restorer's counters and the store's status as of the
// last refresh.
func (r *Restorer) Stats() RestorerStats {
	st := r.status.Load()
	s := RestorerStats{
		Ready:              st.ready,
		Claimed:            st.claimed,
		Quarantined:        st.quar,
		OldestReady:        st.oldest,
		Refreshed:          st.at,
		Missing:            st.missing != nil,
		Restored:           r.restored.Load(),
		Retried:            r.retried.Load(),
		QuarantinedRecords: r.quarantined.Load(),
		Bytes:              r.bytes.Load(),
	}
	if e := r.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

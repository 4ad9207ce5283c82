package dlqdump

// The order in which a pass takes the segments of its listing when other
// restorers work on the store: parts of the listing, shuffled, looked at
// before they are started, and turned when others work in them (see
// pipeline).

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dlqdump/dlqdump/sink"
)

// A part of the listing, when other restorers work on the store, holds a
// 256th of it, at least minPart segments and at most a page (seenPage), so
// that looking at a part is a request for its page, and a large listing
// is not looked at part by part by every restorer; a listing of fewer than
// 8 × minPart is cut into eighths of at least minSmallPart (partSize).
const (
	minPart      = 64
	minSmallPart = 8
	parts        = 256
)

// partSize returns how many segments a part of a listing of n holds: a
// 256th of it, from minPart to a page (seenPage), and an eighth of a
// listing smaller than 8 × minPart (but at least minSmallPart segments),
// so that restorers sharing a small listing (the end of a drain, when what
// is left fits in one part of 64) still spread over it instead of all
// taking it in the same order.
func partSize(n int) int {
	return min(max(n/parts, min(minPart, max(minSmallPart, n/8))), seenPage)
}

// at returns the index in names of the segment at position k of the order,
// for Run, which is there.
func (pl *pipeline) at(k int) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.runAt = k
	return pl.atLocked(k)
}

func (pl *pipeline) atLocked(k int) int {
	if pl.order == nil {
		return k
	}
	return pl.order[k]
}

// positionLocked returns the position in the order of names[i].
func (pl *pipeline) positionLocked(i int) int {
	if pl.pos == nil {
		return i
	}
	return pl.pos[i]
}

// shuffleLocked takes the parts of the listing neither the feeder nor Run
// has reached in a random order, once.
func (pl *pipeline) shuffleLocked() {
	partSize := pl.partSize
	if pl.order != nil || len(pl.names) <= partSize {
		return
	}
	from := max(pl.next, pl.runAt+1)
	if from > 0 {
		from = (from/partSize + 1) * partSize // from the next part on: the order of what was reached stays
	}
	pl.order = make([]int, len(pl.names))
	pl.pos = make([]int, len(pl.names))
	for k := range pl.order {
		pl.order[k] = k
	}
	if from < len(pl.names) {
		parts := rand.Perm((len(pl.names) - from + partSize - 1) / partSize)
		k := from
		for _, p := range parts {
			for i := from + p*partSize; i < min(from+(p+1)*partSize, len(pl.names)); i++ {
				pl.order[k] = i
				k++
			}
		}
	}
	for k, i := range pl.order {
		pl.pos[i] = k
	}
}

// turnLocked reverses the order of the rest of the part of names[i], from
// position k on, when the look at it found segments of it claimed by other
// restorers (which take it oldest first from where they entered it), so
// that this restorer takes it from its newest end and meets them in its
// middle instead of at their frontier, where all its segments in flight
// would be claims lost to them. It reports whether it did; it does not
// when Run has reached position k (the order of what Run reached stays).
func (pl *pipeline) turnLocked(k, i int, met bool) bool {
	p := pl.part(i)
	if pl.order == nil || pl.runAt >= k || pl.turned[p] {
		return false
	}
	end := k
	held := false
	for end < len(pl.order) && pl.part(pl.order[end]) == p {
		name := pl.names[pl.order[end]]
		if !pl.started[name] && (pl.elsewhere[name] || pl.listed != nil && pl.listed.live[name]) {
			held = true
		}
		end++
	}
	if !held && !met || end-k < 2 {
		return false
	}
	if pl.turned == nil {
		pl.turned = map[int]bool{}
	}
	pl.turned[p] = true
	slices.Reverse(pl.order[k:end])
	for q := k; q < end; q++ {
		pl.pos[pl.order[q]] = q
	}
	return true
}

// part returns the part of names[i].
func (pl *pipeline) part(i int) int { return i / pl.partSize }

// others looks at the store again after a run met another restorer's work
// since the pass's listing: with records, it lists the records, and the
// segments claimed by others since then (with a record now that had none,
// and that this pass did not start) are passed over; with ready, it lists
// the ready segments after names[i] (a page: sink.NamesAfter), and those of
// names in that range that are no longer there (finished by others) are
// passed over, without a request either; both listings at once. A segment
// whose record was there at the listing, not held by a live claim, is
// tried as usual: it may have been released. A listing that fails changes
// nothing.
func (pl *pipeline) others(i int, records, ready bool) {
	st := pl.listed
	var (
		elsewhere map[string]bool
		gone      []string
		failed    atomic.Bool
		wg        sync.WaitGroup
	)
	if records && st != nil {
		wg.Go(func() {
			m := map[string]bool{}
			for name, err := range pl.r.c.Reader.RecordNames(pl.ctx) {
				if err != nil {
					failed.Store(true)
					return
				}
				if !st.recorded[name] {
					m[name] = true
				}
			}
			elsewhere = m
		})
	}
	if ready && i > 0 {
		wg.Go(func() {
			now := map[string]bool{}
			last := ""
			for name, err := range sink.NamesAfter(pl.ctx, pl.r.c.Reader, sink.AreaReady, pl.names[i-1]) {
				if err != nil {
					failed.Store(true)
					return
				}
				now[name], last = true, name
				if len(now) == seenPage {
					break
				}
			}
			for _, name := range pl.names[i:] {
				if len(now) == seenPage && name > last {
					break // beyond the page: not seen
				}
				if !now[name] {
					gone = append(gone, name)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return
	}
	pl.mu.Lock()
	if elsewhere != nil {
		pl.elsewhere = elsewhere
	}
	for _, name := range gone {
		if pl.gone == nil {
			pl.gone = map[string]bool{}
		}
		pl.gone[name] = true
	}
	pl.mu.Unlock()
}

// elsewhereLocked returns why the feeder passes over names[i], nil to start
// it.
func (pl *pipeline) elsewhereLocked(i int, name string) error {
	switch {
	case pl.started[name]:
		return nil
	case pl.left == pl.part(i)+1:
		return fmt.Errorf("%w: segment %s: left to another restorer working on its part of the listing", ErrClaimed, name)
	case pl.gone[name]:
		return fmt.Errorf("%w: segment %s: finished by another restorer since it was listed", ErrNotFound, name)
	case pl.elsewhere[name]:
		return fmt.Errorf("%w: segment %s: claimed by another restorer since it was listed", ErrClaimed, name)
	case pl.listed != nil && pl.listed.live[name]:
		// Trying it would read its record to learn what the listing
		// did; the listing's look keeps observing it, so that it is
		// taken over once its holder stops renewing it.
		return fmt.Errorf("%w: segment %s: claimed by another restorer when it was listed", ErrClaimed, name)
	}
	return nil
}

package dlqdump

import (
	"sync"
	"sync/atomic"

	"github.com/dlqdump/dlqdump/segment"
)

// Transforming ahead (RunOptions.TransformWorkers above 1): the records of
// the next block are transformed on several goroutines while the records of
// the block before are delivered, one at a time and in order, as without.
// The Transform's results wait in the block's ahead until the delivering
// goroutine reaches their record; what became of a record (delivered, set
// aside, stopped at) is decided there, in record order, as for a record
// transformed when reached. So the order of deliveries, the checkpoints
// and the crash bound are those of a pass without it; what changes is that
// the Transform runs on records the pass may not reach (it stopped in the
// block), from several goroutines at once.
//
// Memory: the results held per block are bounded by aheadBudget; past it
// the rest of the block is transformed when reached. Two blocks are held
// (the one being delivered, and the next), only where two fit the
// stream's read-ahead (setAhead).

// aheadChunk is how many records a goroutine takes at a time.
const aheadChunk = 32

// ahead is a block's records being transformed ahead of their delivery.
type ahead struct {
	g       *segRun
	recs    []segment.Record
	first   uint64 // the Seq of recs[0]
	results []aheadResult
	budget  int64
	next    atomic.Int64 // the next chunk to take
	used    atomic.Int64 // bytes of the results held
	stop    atomic.Bool  // take no more records: over budget, or abandoned
	wg      sync.WaitGroup
}

// aheadResult is the Transform's result on one record.
type aheadResult struct {
	rp   *Replay
	err  error
	done bool
}

// aheadBudget returns the bytes of results a block may hold ahead: twice
// its memory. A record whose result does not fit is transformed when
// reached, as without TransformWorkers.
func (g *segRun) aheadBudget(b *segment.Block) int64 {
	return int64(2 * b.Mem())
}

// setAhead decides whether the run transforms ahead: a Transform with
// TransformWorkers above 1, not a dry run (whose sample of changes takes
// the records in order), and each of the segment's blocks fits its
// stream's read-ahead, so that the next block, held while one is
// delivered, adds at most the read-ahead again (restore_memory.go); a
// segment read alone (its blocks too large for its share) transforms each
// record when reached.
func (g *segRun) setAhead(opts *segment.StreamOptions, alone bool) {
	readAhead := opts.ReadAhead
	if readAhead <= 0 {
		readAhead = segment.DefaultReadAhead
	}
	g.aheadOK = g.opts.Transform != nil && g.opts.TransformWorkers > 1 && !g.dry && !alone && g.fits(int64(readAhead))
}

// transformsAhead reports whether the run transforms records ahead.
func (g *segRun) transformsAhead() bool { return g.aheadOK }

// startAhead starts transforming b's records on TransformWorkers goroutines.
func (g *segRun) startAhead(b *segment.Block) *ahead {
	a := &ahead{g: g, budget: g.aheadBudget(b)}
	for rec := range b.Records() {
		a.recs = append(a.recs, rec)
	}
	if len(a.recs) == 0 {
		return a
	}
	a.first = a.recs[0].Seq
	a.results = make([]aheadResult, len(a.recs))
	workers := min(g.opts.TransformWorkers, (len(a.recs)+aheadChunk-1)/aheadChunk)
	a.wg.Add(workers)
	for range workers {
		go func() {
			defer a.wg.Done()
			a.work()
		}()
	}
	return a
}

// work transforms chunks of records until none is left or a stops.
func (a *ahead) work() {
	g := a.g
	for {
		c := int(a.next.Add(1) - 1)
		if c*aheadChunk >= len(a.recs) {
			return
		}
		for i := c * aheadChunk; i < min((c+1)*aheadChunk, len(a.recs)); i++ {
			if a.stop.Load() || g.ctx.Err() != nil {
				return
			}
			rec := &a.recs[i]
			if g.filtered && !g.selects(rec) || g.r.c.MaxReplays >= 0 && replaysOf(rec) >= g.r.c.MaxReplays {
				continue // not transformed when reached either
			}
			rp := g.replayOf(rec)
			err := g.runTransform(rp)
			if err == nil && a.used.Add(int64(rp.size())) > a.budget {
				a.stop.Store(true) // over budget: this one and the rest when reached
				return
			}
			a.results[i] = aheadResult{rp: rp, err: err, done: true}
		}
	}
}

// wait returns once no goroutine transforms a's records any more; the
// calling goroutine takes chunks too meanwhile.
func (a *ahead) wait() {
	if a == nil {
		return
	}
	if len(a.recs) > 0 {
		a.work()
	}
	a.wg.Wait()
}

// abandon stops the goroutines and waits for them: the block is not
// delivered.
func (a *ahead) abandon() {
	if a == nil {
		return
	}
	a.stop.Store(true)
	a.wg.Wait()
}

// take returns the result on rec, when it was transformed ahead. Called
// after wait, from the delivering goroutine.
func (a *ahead) take(rec *segment.Record) (*Replay, error, bool) {
	if a == nil || rec.Seq < a.first || rec.Seq-a.first >= uint64(len(a.results)) {
		return nil, nil, false
	}
	r := &a.results[rec.Seq-a.first]
	if !r.done {
		return nil, nil, false
	}
	rp, err := r.rp, r.err
	*r = aheadResult{} // delivered: not held by the block any more
	return rp, err, true
}

package dlqdump

import (
	"context"
	"reflect"
	"sync"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// What a selective pass plans a segment with (its header, footer and
// summary) does not change while the segment keeps its name: a segment is
// written once, and a name is never reused for other bytes (a copy, a
// rewrap, a summary added, is a segment of another name). So a Restorer
// keeps what it read for its plans, up to planCacheBytes, and many passes
// over one store (restore jobs, each with its selection, and each job's
// dry run before its pass) open each segment to plan it once, not once
// per pass: on S3, the requests of a plan are those of the segments not
// seen before.

// The Restorers of one process over one store (a jobs.Runner's, given one
// Reader) share what they planned unencrypted segments with: their header,
// footer and summary are the same bytes for every Restorer, whatever its
// keys, so a store is planned once per process, not once per Restorer
// (12 times in the jobs one-store benchmark's process of 3 runners of 4).
// What an encrypted segment's plan holds depends on the Restorer's keys (a
// sealed summary is read only with the data key): it stays the Restorer's
// own, as does everything a Restorer with Encryption.RequireEncrypted
// plans (it refuses unencrypted segments that others plan).

// planCacheBytes bounds the summaries and indexes a Restorer keeps for its
// plans; past it the oldest are let go. A summary larger than a quarter of
// it is not kept.
const planCacheBytes = 4 << 20

// planInfo is what a segment's plan is made from.
type planInfo struct {
	hdr    segment.Header
	footer *segment.Footer
	sum    *segment.Summary
	size   int
}

type planKey struct {
	area sink.Area
	name string
}

// planCache holds planInfos by segment, oldest first out.
type planCache struct {
	mu    sync.Mutex
	m     map[planKey]*planInfo
	order []planKey
	bytes int
}

func (c *planCache) get(k planKey) *planInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *planCache) put(k planKey, p *planInfo) {
	if p.size > planCacheBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[planKey]*planInfo{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	for c.bytes+p.size > planCacheBytes && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		if o := c.m[old]; o != nil {
			c.bytes -= o.size
			delete(c.m, old)
		}
	}
	c.m[k], c.bytes = p, c.bytes+p.size
	c.order = append(c.order, k)
}

// planInfoOf returns what segment name in area is planned with, from the
// cache or read (nil when it cannot be opened or read: it may match).
// Restorers sharing plans that plan one segment at the same moment read it
// once: the others wait for what the first reads (planFlights).
func (r *Restorer) planInfoOf(ctx context.Context, area sink.Area, name string) *planInfo {
	if p := r.plannedWith(area, name); p != nil {
		return p
	}
	if r.shared == nil {
		return r.readPlanInfo(ctx, area, name)
	}
	p, first := r.shared.flights.do(ctx, planKey{area, name}, func() *planInfo { return r.readPlanInfo(ctx, area, name) })
	if !first && (p == nil || p.hdr.Encrypted) {
		// The first could not read it (its context, say), or it is
		// encrypted: what its plan holds depends on the keys, read
		// with this Restorer's own.
		return r.readPlanInfo(ctx, area, name)
	}
	return p
}

// readPlanInfo reads what segment name in area is planned with and keeps it
// (nil when it cannot be opened or read).
func (r *Restorer) readPlanInfo(ctx context.Context, area sink.Area, name string) *planInfo {
	k := planKey{area, name}
	f, err := r.c.Reader.Open(ctx, area, name)
	if err != nil {
		return nil
	}
	defer f.Close()
	sr, err := segment.NewReaderContext(ctx, f, f.Size(), r.readerOptions(name))
	if err != nil {
		return nil
	}
	sum, _ := sr.Summary() // none, damaged or sealed: it may match
	p := &planInfo{hdr: sr.Header(), footer: sr.Footer(), sum: sum}
	if p.footer == nil {
		return p // not sealed: not kept
	}
	p.size = 256 + len(p.footer.Blocks)*64 + sum.Size()*2
	if r.shared != nil && !p.hdr.Encrypted {
		r.shared.cache.put(k, p)
	} else {
		r.plans.put(k, p)
	}
	return p
}

// sharedPlans is the plan cache of the Restorers over one Reader, with the
// number of open Restorers using it.
type sharedPlans struct {
	reader  sink.Reader
	cache   planCache
	flights planFlights
	refs    int
}

var (
	sharedMu    sync.Mutex
	sharedByRdr = map[sink.Reader]*sharedPlans{}
)

// joinPlans returns the plan cache the Restorers over reader share, nil
// when reader cannot be told apart from others by comparing it (its
// dynamic value is not comparable) or the Restorer requires encrypted
// segments. leavePlans lets it go.
func joinPlans(reader sink.Reader, requireEncrypted bool) *sharedPlans {
	if reader == nil || requireEncrypted || !reflect.ValueOf(reader).Comparable() {
		return nil
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sp := sharedByRdr[reader]
	if sp == nil {
		sp = &sharedPlans{reader: reader}
		sharedByRdr[reader] = sp
	}
	sp.refs++
	return sp
}

// leavePlans ends a Restorer's use of sp; the last one out lets it go.
func leavePlans(sp *sharedPlans) {
	if sp == nil {
		return
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sp.refs--; sp.refs == 0 {
		delete(sharedByRdr, sp.reader)
	}
}

// plannedWith returns what segment name in area was planned with, if it is
// kept (nil: it is not), without reading anything.
func (r *Restorer) plannedWith(area sink.Area, name string) *planInfo {
	k := planKey{area, name}
	if p := r.plans.get(k); p != nil {
		return p
	}
	if r.shared != nil {
		return r.shared.cache.get(k)
	}
	return nil
}

// rulesOut reports whether sel can select no record of segment name in
// area, by what its header, footer and summary say: of the segment as a
// whole, or of each of its blocks.
func (r *Restorer) rulesOut(ctx context.Context, area sink.Area, name string, sel *selection.Selection) bool {
	p := r.planInfoOf(ctx, area, name)
	if p == nil {
		return false
	}
	hdr := p.hdr
	return sel.Plan(&selection.Segment{Area: area, Name: name, Header: &hdr, Footer: p.footer, Summary: p.sum}).Skip
}

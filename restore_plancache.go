package dlqdump

import (
	"context"
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
func (r *Restorer) planInfoOf(ctx context.Context, area sink.Area, name string) *planInfo {
	k := planKey{area, name}
	if p := r.plans.get(k); p != nil {
		return p
	}
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
	r.plans.put(k, p)
	return p
}

// rulesOut reports whether sel can select no record of segment name in
// area, by what its header, footer and summary say.
func (r *Restorer) rulesOut(ctx context.Context, area sink.Area, name string, sel *selection.Selection) bool {
	p := r.planInfoOf(ctx, area, name)
	if p == nil {
		return false
	}
	hdr := p.hdr
	return sel.SkipSegment(&selection.Segment{Area: area, Name: name, Header: &hdr, Footer: p.footer, Summary: p.sum})
}

package console

import (
	"container/list"
	"context"
	"sync"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// A search plans each segment before it opens it for its records: what its
// header, footer and summary say decides whether it, or which blocks of it,
// can hold a selected record. Segments never change under a name, so that
// is read once and kept, within a budget of bytes (a summary takes a few
// percent of its segment).

// planBudget bounds the bytes of the footers and summaries kept.
const planBudget = 64 << 20

// planned is what a search plans a segment with.
type planned struct {
	hdr  segment.Header
	ft   *segment.Footer
	sum  *segment.Summary
	cost int
}

func (p *planned) segment(si sink.Info) *selection.Segment {
	return &selection.Segment{Area: si.Area, Name: si.Name, Header: &p.hdr, Footer: p.ft, Summary: p.sum}
}

// plans keeps the planned of the segments read last, within planBudget.
type plans struct {
	mu    sync.Mutex
	used  int
	order *list.List // of segKey, most recent first
	m     map[segKey]*list.Element
	vals  map[segKey]*planned
}

func newPlans() *plans {
	return &plans{order: list.New(), m: map[segKey]*list.Element{}, vals: map[segKey]*planned{}}
}

func (c *plans) get(k segKey) *planned {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return c.vals[k]
}

func (c *plans) put(k segKey, p *planned) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok || p.cost > planBudget/4 {
		return
	}
	c.m[k] = c.order.PushFront(k)
	c.vals[k] = p
	c.used += p.cost
	for c.used > planBudget {
		last := c.order.Back()
		old := last.Value.(segKey)
		c.order.Remove(last)
		c.used -= c.vals[old].cost
		delete(c.m, old)
		delete(c.vals, old)
	}
}

// plan returns what a search plans segment si with: read once (its header,
// footer and summary, opened with the console's keys, if any) and kept
// while it is sealed; nil when it cannot be read (the search then reads it
// and reports why).
func (h *Handler) plan(ctx context.Context, si sink.Info) *planned {
	k := keyOf(si)
	if p := h.plans.get(k); p != nil {
		return p
	}
	f, err := h.rd.Open(ctx, si.Area, si.Name)
	if err != nil {
		return nil
	}
	defer f.Close()
	ro := &segment.ReaderOptions{Name: si.Name}
	if h.walker.Options != nil {
		if ro, err = h.walker.Options(si.Name); err != nil {
			return nil
		}
	}
	sr, err := segment.NewReaderContext(ctx, f, f.Size(), ro)
	if err != nil {
		// Without its key the header and footer still plan it.
		ro.Keys = nil
		if sr, err = segment.NewReader(f, f.Size(), ro); err != nil {
			return nil
		}
	}
	p := &planned{hdr: sr.Header(), ft: sr.Footer()}
	p.sum, _ = sr.Summary() // none, damaged or sealed: every block may match
	if p.ft != nil {
		p.cost = 64 + 56*len(p.ft.Blocks) + p.sum.Size()
		k.size = f.Size()
		h.plans.put(k, p) // sealed: it never changes
	}
	return p
}

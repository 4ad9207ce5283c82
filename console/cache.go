package console

import (
	"container/list"
	"context"
	"sync"

	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

// segKey names a stored segment: a segment's bytes never change under one
// name in one area, so what is read of them can be kept.
type segKey struct {
	area sink.Area
	name string
	size int64
	prog string // what is counted of it depends on its restore progress: histKeyOf
}

func keyOf(si sink.Info) segKey { return segKey{area: si.Area, name: si.Name, size: si.Size} }

// lru keeps at most n values, the least recently used going first.
type lru[V any] struct {
	mu    sync.Mutex
	n     int
	order *list.List // of segKey, most recent first
	m     map[segKey]*list.Element
	vals  map[segKey]V
}

func newLRU[V any](n int) *lru[V] {
	return &lru[V]{n: n, order: list.New(), m: map[segKey]*list.Element{}, vals: map[segKey]V{}}
}

func (c *lru[V]) get(k segKey) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return c.vals[k], true
}

func (c *lru[V]) put(k segKey, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.order.MoveToFront(e)
		c.vals[k] = v
		return
	}
	c.m[k] = c.order.PushFront(k)
	c.vals[k] = v
	for c.order.Len() > c.n {
		last := c.order.Back()
		old := last.Value.(segKey)
		c.order.Remove(last)
		delete(c.m, old)
		delete(c.vals, old)
	}
}

// summaryCache keeps what segments' headers and footers say (not their
// claims, which change).
type summaryCache struct{ *lru[*inspect.Summary] }

func newSummaryCache(n int) *summaryCache { return &summaryCache{newLRU[*inspect.Summary](n)} }

// summary returns the summary of a segment, read once; claim is attached to
// a copy.
func (h *Handler) summary(ctx context.Context, si sink.Info, claim *inspect.Claim) *inspect.Summary {
	k := keyOf(si)
	s, ok := h.cache.get(k)
	if !ok {
		s = inspect.Summarize(ctx, h.rd, si, nil, si.Area.String()+"/"+si.Name)
		if s.Err == nil && (s.Sealed || si.Area != sink.AreaReady) {
			// An unsealed ready segment may still be recovered and
			// sealed: read it again next time.
			h.cache.put(k, s)
		}
	}
	c := *s
	c.Info = si
	c.Claim = claim
	return &c
}

package console

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/signature"
	"github.com/dlqdump/dlqdump/sink"
)

// The overview's charts count a store's records by reason and by error over
// time. Segments never change under a name, so each is read once and its
// counts kept (histograms): a store is read in slices of at most the
// search budget per request, and the page says how much was read.

const (
	// histStep is the finest time step counted, in seconds.
	histStep = 10
	// histMaxValues bounds the values of a header counted per segment;
	// the others are counted as "(other)".
	histMaxValues = 32
	// histMaxValueLen shortens long values (error messages).
	histMaxValueLen = 120
	// chartBars is how many bars a chart has at most.
	chartBars = 48
	// chartSeries is how many values a chart shows; the others are
	// summed as "(other)".
	chartSeries = 6
)

// Dimensions of a histogram.
const (
	dimReason = iota
	dimError
	dims
)

var dimHeaders = [dims]string{dlqdump.HeaderReason, dlqdump.HeaderError}

type histKey struct {
	value string
	step  int64 // Unix seconds / histStep
}

// segHist counts the records of one segment still in the dump (those its
// restore progress did not handle) by value and time step, per dimension,
// and says how many there are and when the oldest entered the dump.
type segHist struct {
	m       [dims]map[histKey]uint64
	records uint64
	oldest  int64 // Unix nanoseconds, 0 when no record
}

type histograms struct {
	*lru[*segHist]
	scanMu sync.Mutex // one request reads segments at a time
}

func newHistograms(n int) *histograms { return &histograms{lru: newLRU[*segHist](n)} }

func shorten(s string) string {
	if len(s) <= histMaxValueLen {
		return s
	}
	r := []rune(s)
	if len(r) > histMaxValueLen {
		return string(r[:histMaxValueLen-1]) + "…"
	}
	return s
}

// count reads a segment's records (block headers only, for an encrypted
// segment without its key) into a histogram, leaving out those its restore
// progress cv (nil: none) handled, as stat and a search do.
func (h *Handler) count(ctx context.Context, si sink.Info, cv *inspect.Claim) (*segHist, error) {
	var sh segHist
	for d := range sh.m {
		sh.m[d] = map[histKey]uint64{}
	}
	seen := func(t int64, n uint64) {
		if sh.records == 0 || t < sh.oldest {
			sh.oldest = t
		}
		sh.records += n
	}
	values := [dims]map[string]bool{{}, {}}
	add := func(d int, v string, t int64, n uint64) {
		if !values[d][v] {
			if len(values[d]) >= histMaxValues {
				v = "(other)"
			} else {
				values[d][v] = true
			}
		}
		sh.m[d][histKey{v, t / 1e9 / histStep}] += n
	}
	sealed := func(bi segment.BlockInfo) error {
		for d := range sh.m {
			add(d, "(encrypted)", bi.MinTime, uint64(bi.Count))
		}
		seen(bi.MinTime, uint64(bi.Count))
		return nil
	}
	_, err := h.walker.Walk(ctx, si, inspect.WalkOpts{Sealed: sealed, Done: cv}, func(_ *segment.Header, b *segment.Block) error {
		for i := range b.Len() {
			rec := b.Record(i)
			if cv.Skip(rec.Seq) {
				continue
			}
			seen(rec.Time, 1)
			for d, key := range dimHeaders {
				v, ok := rec.Headers.Get(key)
				switch {
				case !ok:
					v = "(none)"
				case d == dimError:
					// By error group: a message carrying its
					// milliseconds is one value, not thousands.
					v = signature.Of(v)
				}
				add(d, shorten(v), rec.Time, 1)
			}
		}
		return nil
	}, func(error) {})
	if err != nil {
		return nil, err
	}
	return &sh, nil
}

// chartJSON is a chart of counts over time, one series per value.
type chartJSON struct {
	From   string            `json:"from"`   // start of the first bar
	StepS  int64             `json:"step_s"` // seconds per bar
	Bars   int               `json:"bars"`
	Series []seriesJSON      `json:"series"`
	Totals map[string]uint64 `json:"-"`
}

type seriesJSON struct {
	Name   string   `json:"name"`
	Total  uint64   `json:"total"`
	Counts []uint64 `json:"counts"`
}

// histProgress says how much of the store the charts count.
type histProgress struct {
	Scanned  int  `json:"scanned"`
	Of       int  `json:"of"`
	Complete bool `json:"complete"`
}

// histKeyOf names the histogram of segment si with restore progress cv:
// its records still in the dump change only with its progress.
func histKeyOf(si sink.Info, cv *inspect.Claim) segKey {
	k := keyOf(si)
	if cv.Started() {
		p := &cv.Prog
		k.prog = fmt.Sprintf("%d/%d/%t/%v/%v", p.Offset, p.Seq, p.Done, p.Aside, p.Carve)
	}
	return k
}

// charts counts the records of segs still in the dump (claims: the
// segments' claim records) by reason and by error over time, reading the
// segments not counted yet for at most budget.
func (h *Handler) charts(ctx context.Context, segs []sink.Info, claims map[string]*inspect.Claim, budget time.Duration) ([dims]chartJSON, histProgress) {
	p := histProgress{Of: len(segs)}
	var hs []*segHist
	var missing []sink.Info
	for _, si := range segs {
		if sh, ok := h.hist.get(histKeyOf(si, claims[si.Name])); ok {
			hs = append(hs, sh)
		} else {
			missing = append(missing, si)
		}
	}
	if len(missing) > 0 && h.hist.scanMu.TryLock() {
		deadline := time.Now().Add(budget)
		for _, si := range missing {
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			cv := claims[si.Name]
			sh, err := h.count(ctx, si, cv)
			if err != nil {
				continue // gone meanwhile, damaged header, no key: not counted
			}
			h.hist.put(histKeyOf(si, cv), sh)
			hs = append(hs, sh)
		}
		h.hist.scanMu.Unlock()
	}
	p.Scanned = len(hs)
	p.Complete = p.Scanned == p.Of
	var out [dims]chartJSON
	for d := range out {
		out[d] = chart(hs, d)
	}
	return out, p
}

// chart sums the histograms of one dimension into at most chartBars bars
// and chartSeries series.
func chart(hs []*segHist, d int) chartJSON {
	var lo, hi int64
	totals := map[string]uint64{}
	first := true
	for _, sh := range hs {
		for k, n := range sh.m[d] {
			if first || k.step < lo {
				lo = k.step
			}
			if first || k.step > hi {
				hi = k.step
			}
			first = false
			totals[k.value] += n
		}
	}
	c := chartJSON{Series: []seriesJSON{}}
	if first {
		return c
	}
	span := hi - lo + 1
	per := (span + chartBars - 1) / chartBars // steps per bar
	c.Bars = int((span + per - 1) / per)
	c.StepS = per * histStep
	c.From = inspect.JSONTime(time.Unix(lo*histStep, 0))
	names := make([]string, 0, len(totals))
	for v := range totals {
		names = append(names, v)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(totals[b], totals[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	index := map[string]int{}
	for i, v := range names {
		if i >= chartSeries {
			if _, ok := index["(other)"]; !ok {
				index["(other)"] = len(c.Series)
				c.Series = append(c.Series, seriesJSON{Name: "(other)", Counts: make([]uint64, c.Bars)})
			}
			index[v] = index["(other)"]
			continue
		}
		if _, dup := index[v]; !dup {
			index[v] = len(c.Series)
			c.Series = append(c.Series, seriesJSON{Name: v, Counts: make([]uint64, c.Bars)})
		}
	}
	for _, sh := range hs {
		for k, n := range sh.m[d] {
			s := &c.Series[index[k.value]]
			s.Counts[(k.step-lo)/per] += n
			s.Total += n
		}
	}
	return c
}

package prometheus

import (
	"maps"
	"sync"
	"sync/atomic"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/dlqdump/dlqdump/signature"
)

// Error groups: dlqdump_dumped_error_groups_total{group} counts the
// records a Queue dumps by the signature of their error header (package
// signature: "payment gateway timeout after <num>ms"), so that an alert can
// see a new kind of failure grow. Series are bounded: the first
// WithErrorGroups groups the process meets each get one (kept for good, a
// counter's series never go away), and every later group counts in
// group="(other)". The signatures are computed on the Queue's compressing
// goroutines, when a block is cut, about half a microsecond per record with
// an error header (go test -bench BenchmarkOf ./signature).

const (
	// MetricErrorGroups counts dumped records by error group.
	MetricErrorGroups = "dlqdump_dumped_error_groups_total"
	// LabelGroup is its label: an error signature, or OtherGroup.
	LabelGroup = "group"
	// OtherGroup is the group of the records of groups past the bound.
	OtherGroup = "(other)"
)

// WithErrorGroups adds dlqdump_dumped_error_groups_total, where n error
// groups get a series of their own (10 is a good start); 0 leaves it out,
// and no signature is computed. Default 0: off (computing signatures costs
// the Queue's compressors about a sixth more CPU per record with an error
// header).
func WithErrorGroups(n int) Option {
	return func(o *options) { o.errorGroups = max(n, 0) }
}

// errorGroups counts records by error group, at most max series besides
// OtherGroup's. Reads load an immutable map without locking; a new group
// copies it.
type errorGroups struct {
	vec   *prom.CounterVec
	max   int
	other prom.Counter
	m     atomic.Pointer[map[string]prom.Counter]
	mu    sync.Mutex
}

func newErrorGroups(vec *prom.CounterVec, n int) *errorGroups {
	g := &errorGroups{vec: vec, max: n, other: vec.WithLabelValues(OtherGroup)}
	g.m.Store(&map[string]prom.Counter{})
	return g
}

func (g *errorGroups) add(msg string) {
	sig := signature.Of(msg)
	if c, ok := (*g.m.Load())[sig]; ok {
		c.Inc()
		return
	}
	g.mu.Lock()
	m := *g.m.Load()
	c, ok := m[sig]
	if !ok && len(m) < g.max {
		c = g.vec.WithLabelValues(sig)
		nm := maps.Clone(m)
		nm[sig] = c
		g.m.Store(&nm)
		ok = true
	}
	g.mu.Unlock()
	if !ok {
		c = g.other
	}
	c.Inc()
}

// DumpError counts a dumped record by the signature of its error (a
// dlqdump.ErrorMetricsWriter: the Queue calls it).
func (w *Writer) DumpError(msg string) {
	if w.errGroups != nil {
		w.errGroups.add(msg)
	}
}

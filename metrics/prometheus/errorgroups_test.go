package prometheus_test

import (
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/errcorpus"
	dlqprom "github.com/dlqdump/dlqdump/metrics/prometheus"
	"github.com/dlqdump/dlqdump/signature"
)

// errorGroupSeries gathers dlqdump_dumped_error_groups_total by group.
func errorGroupSeries(t *testing.T, reg *prom.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]float64
	for _, mf := range mfs {
		if mf.GetName() != dlqprom.MetricErrorGroups {
			continue
		}
		out = map[string]float64{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == dlqprom.LabelGroup {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// A Queue counts what it dumps by error group: the first three groups met
// get a series each, the other seven count in (other); every record with an
// error is counted once; WithErrorGroups(0) has no such metric.
func TestErrorGroupsMetric(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	mw, err := dlqprom.New(reg, "orders", dlqprom.WithErrorGroups(3))
	if err != nil {
		t.Fatal(err)
	}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: t.TempDir()}, Capacity: dlqdump.Megabyte, MetricsWriter: mw})
	if err != nil {
		t.Fatal(err)
	}
	recs := errcorpus.Records(time.Now(), time.Hour)
	family := map[string]float64{} // records by signature
	var withError float64
	for _, r := range recs {
		if e, ok := r.Headers[dlqdump.HeaderError]; ok {
			family[signature.Of(e)]++
			withError++
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: r.Payload, Headers: r.Headers}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// Which groups are met first depends on which block a compressor
	// takes first; a group that got a series counts all its records
	// there (it got it at its first), the others all go to (other).
	got := errorGroupSeries(t, reg)
	if len(got) != 4 {
		t.Fatalf("series %v, want three groups and (other)", got)
	}
	var own float64
	for g, n := range got {
		if g == dlqprom.OtherGroup {
			continue
		}
		if n != family[g] {
			t.Errorf("group %q: %v, want %v", g, n, family[g])
		}
		own += n
	}
	if got[dlqprom.OtherGroup] != withError-own {
		t.Errorf("(other): %v, want %v", got[dlqprom.OtherGroup], withError-own)
	}

	reg = prom.NewPedanticRegistry()
	if _, err := dlqprom.New(reg, "orders", dlqprom.WithErrorGroups(0)); err != nil {
		t.Fatal(err)
	}
	if got := errorGroupSeries(t, reg); got != nil {
		t.Errorf("WithErrorGroups(0): %v", got)
	}
}

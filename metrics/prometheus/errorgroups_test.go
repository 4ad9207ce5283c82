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
	want := map[string]float64{}
	own := map[string]bool{} // the first three groups met
	for _, r := range recs {
		if e, ok := r.Headers[dlqdump.HeaderError]; ok {
			sig := signature.Of(e)
			if !own[sig] && len(own) < 3 {
				own[sig] = true
			}
			if !own[sig] {
				sig = dlqprom.OtherGroup
			}
			want[sig]++
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: r.Payload, Headers: r.Headers}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	got := errorGroupSeries(t, reg)
	if len(got) != 4 || len(want) != 4 {
		t.Fatalf("series %v, want %v", got, want)
	}
	for g, n := range want {
		if got[g] != n {
			t.Errorf("group %q: %v, want %v", g, got[g], n)
		}
	}

	reg = prom.NewPedanticRegistry()
	if _, err := dlqprom.New(reg, "orders", dlqprom.WithErrorGroups(0)); err != nil {
		t.Fatal(err)
	}
	if got := errorGroupSeries(t, reg); got != nil {
		t.Errorf("WithErrorGroups(0): %v", got)
	}
}

package prometheus

import (
	"testing"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dlqdump/dlqdump"
)

// Alerts on a counter's increase need its series before the first event:
// a series that appears at 1 has no increase to see. Every reason and area
// dlqdump passes exists from New on, at zero.
func TestSeriesExistFromStart(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	newWriter(t, reg, "orders")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				if l.GetName() != LabelQueue {
					key += l.GetName() + "=" + l.GetValue() + ","
				}
			}
			if have[mf.GetName()] == nil {
				have[mf.GetName()] = map[string]bool{}
			}
			have[mf.GetName()][key] = true
		}
	}
	want := map[string][]string{}
	for _, r := range dlqdump.FailReasons {
		want[MetricFailures] = append(want[MetricFailures], "reason="+r+",")
	}
	for _, r := range dlqdump.QuarantineReasons {
		want[MetricQuarantined] = append(want[MetricQuarantined], "reason="+r+",")
	}
	for _, a := range []string{"ready", "quarantine", "archive"} {
		for _, r := range []string{dlqdump.RuleMaxAge, dlqdump.RuleMaxSegments, dlqdump.RuleMaxBytes} {
			want[MetricExpired] = append(want[MetricExpired], "area="+a+",rule="+r+",")
		}
	}
	for _, r := range []string{"backpressure", "closed", "encode", "too_large", "write", "corrupt", "no_key"} {
		want[MetricFailures] = append(want[MetricFailures], "reason="+r+",")
	}
	for _, r := range []string{"refused", "decode", "replays", "version", "damaged", "progress"} {
		want[MetricQuarantined] = append(want[MetricQuarantined], "reason="+r+",")
	}
	for name, keys := range want {
		for _, k := range keys {
			if !have[name][k] {
				t.Errorf("no series %s{%s} after New", name, k)
			}
		}
	}
	if n := testutil.CollectAndCount(reg, MetricFailures); n < 13 {
		t.Errorf("%s has %d series, want one per reason", MetricFailures, n)
	}
}

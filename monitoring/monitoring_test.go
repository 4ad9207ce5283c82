package monitoring

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	dlqprom "github.com/dlqdump/dlqdump/metrics/prometheus"
)

// exported returns the names of the series metrics/prometheus exports,
// with their label names: every method called once, histograms as their
// _bucket, _sum and _count.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	reg := prom.NewPedanticRegistry()
	w, err := dlqprom.New(reg, "orders")
	if err != nil {
		t.Fatal(err)
	}
	w.Dump(1)
	w.Flush("size", 1, 1, time.Millisecond)
	w.Pending(1)
	w.Restore(1, 1)
	w.Retry()
	w.Quarantine("refused", 1)
	w.Expire("ready", "max_age", 1)
	w.Fail("write")
	w.Source(1, 1, 1, time.Second)
	w.JobStarted(time.Second, false)
	w.JobEnded("completed", 1)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		var names []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(names, l.GetName()) {
					names = append(names, l.GetName())
				}
			}
		}
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			out[mf.GetName()+"_bucket"] = append(slices.Clone(names), "le")
			out[mf.GetName()+"_sum"] = names
			out[mf.GetName()+"_count"] = names
			continue
		}
		out[mf.GetName()] = names
	}
	if len(out) < 20 {
		t.Fatalf("metrics/prometheus exports only %v", out)
	}
	return out
}

// grafanaVars are Grafana's variables in an expression, replaced by values
// Prometheus parses.
var grafanaVars = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range|[A-Za-z_]\w*)\}?`)

func substitute(expr string) string {
	return grafanaVars.ReplaceAllStringFunc(expr, func(v string) string {
		switch strings.Trim(v, "${}") {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		}
		return "x"
	})
}

// checkExpr parses an expression and checks that every series it selects
// is one the library exports, with label names it has.
func checkExpr(t *testing.T, where, expr string, series map[string][]string) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(substitute(expr))
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	selectors := 0
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		selectors++
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		have, ok := series[name]
		if !ok {
			t.Errorf("%s: %q selects %q, which metrics/prometheus does not export", where, expr, name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName && !slices.Contains(have, m.Name) && !slices.Contains([]string{"job", "instance"}, m.Name) {
				t.Errorf("%s: %q matches label %q, which %s does not have (%v)", where, expr, m.Name, name, have)
			}
		}
		return nil
	})
	if selectors == 0 {
		t.Errorf("%s: %q selects no series", where, expr)
	}
}

// Every expression of the Grafana dashboard parses and names series the
// library exports.
func TestDashboard(t *testing.T) {
	series := exported(t)
	b, err := os.ReadFile("grafana/dlqdump.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/dlqdump.json: %v", err)
	}
	n := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkExpr(t, "panel "+p.Title, tg.Expr, series)
			n++
		}
	}
	// label_values(METRIC, LABEL) of the variables.
	lv := regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		m := lv.FindStringSubmatch(q["query"].(string))
		if m == nil {
			t.Errorf("variable %s: query %v is not label_values(METRIC, LABEL)", v.Name, q["query"])
			continue
		}
		if have, ok := series[m[1]]; !ok || !slices.Contains(have, m[2]) {
			t.Errorf("variable %s: %s has no label %s", v.Name, m[1], m[2])
		}
	}
	// Every metric the library exports is on the dashboard.
	all := string(b)
	for name := range series {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !strings.Contains(all, base) {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
	t.Logf("%d panels, %d queries", len(d.Panels), n)
}

// runbookURL is where the alerts' runbook_url annotations point: docs/RUNBOOK.md
// on the project's main branch.
const runbookURL = "https://github.com/dlqdump/dlqdump/blob/main/docs/RUNBOOK.md"

// Every alerting rule parses (as Prometheus loads it) and names series the
// library exports; promtool test rules (scripts/promtool.sh check) tests
// what they fire on.
func TestAlerts(t *testing.T) {
	series := exported(t)
	groups, errs := rulefmt.ParseFile("alerts.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("alerts.yml: %v", errs)
	}
	want := []string{"DlqdumpBacklogOld", "DlqdumpReadySegmentsGrowing", "DlqdumpQuarantineGrowing", "DlqdumpBackpressure",
		"DlqdumpEnqueueRefused", "DlqdumpSinkFailing", "DlqdumpSegmentsUnreadable", "DlqdumpSegmentsRemovedWithoutClaim", "DlqdumpRestoreStalled", "DlqdumpJobFailed",
		"DlqdumpDeadLettersArriving", "DlqdumpNotFlushing", "DlqdumpJobNoProgress", "DlqdumpMetricsAbsent", "DlqdumpInstanceGone"}
	runbook, err := os.ReadFile("../docs/RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			got = append(got, r.Alert)
			checkExpr(t, "alert "+r.Alert, r.Expr, series)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a severity, a summary and a description", r.Alert)
			}
			// Each alert links its own section of the runbook, which is there.
			anchor := strings.ToLower(r.Alert)
			if u := r.Annotations["runbook_url"]; u != runbookURL+"#"+anchor {
				t.Errorf("alert %s: runbook_url %q, want %s#%s", r.Alert, u, runbookURL, anchor)
			}
			if !strings.Contains(string(runbook), "\n## "+r.Alert+"\n") {
				t.Errorf("alert %s: docs/RUNBOOK.md has no section \"## %s\"", r.Alert, r.Alert)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("alerts %v, want %v", got, want)
	}
	b, err := os.ReadFile("alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range want {
		if !strings.Contains(string(b), "alertname: "+a) {
			t.Errorf("alerts_test.yml does not test %s", a)
		}
	}
}

package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/errcorpus"
	"github.com/dlqdump/dlqdump/jobs"
)

// The error groups page and the transform's preview in a real headless
// chromium, over the ten error families of errcorpus (12,280 records over
// six hours): the overview's error chart counts groups, not exact strings;
// the page lists the ten groups with their counts and sparklines; "Replay
// this group…" opens the job dialog on the group's selection, whose
// preview shows what a jq program does to the first records (a unified
// diff), names the column of a program that does not compile, and the job
// created keeps the selection and the program.
func TestErrorGroupsBrowser(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	if _, err := errcorpus.Write(context.Background(), rd, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 6*time.Hour, 2000); err != nil {
		t.Fatal(err)
	}
	st, err := jobs.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := serve(t, &console.Options{Reader: rd, Name: dir, Jobs: st, SearchBudget: 300 * time.Millisecond})

	b := newBrowser(t)
	b.run("open the console", chromedp.Navigate(srv.URL+"/dlq/"))
	b.wait("the charts to count every segment", `window.consoleState.ready && window.consoleState.overview !== null && window.consoleState.overview.charts.complete`)
	// Before, the chart counted exact strings: 16 timeouts per value.
	if got := b.text("#legend-error"); !strings.Contains(got, "payment gateway timeout after <num>ms (10,050)") {
		t.Errorf("the error chart's legend says %q, want the timeouts as one group of 10,050", got)
	}

	b.run("open the error groups", chromedp.Click("#tab-errors"))
	b.wait("every segment counted", `window.repairState.groups !== null && window.repairState.groups.complete`)
	rows := eval[[]string](b, `[...document.querySelectorAll('#err-body tr')].map(r => r.textContent)`)
	if len(rows) != len(errcorpus.Families) {
		t.Fatalf("%d rows: %q", len(rows), rows)
	}
	for i, f := range errcorpus.Families {
		want := fmtCount(f.Count)
		if !strings.HasPrefix(rows[i], want) || !strings.Contains(rows[i], f.Signature) {
			t.Errorf("row %d says %q, want %s × %q", i, rows[i], want, f.Signature)
		}
	}
	if n := eval[int](b, `document.querySelectorAll('#err-body canvas.spark').length`); n != len(errcorpus.Families) {
		t.Errorf("%d sparklines", n)
	}
	b.view("console-errors.png")

	// Replay the timeouts, fixing the customers' e-mail addresses.
	b.run("replay the first group", chromedp.Click(`#err-body tr:first-child button.control`))
	b.wait("the job dialog", `document.getElementById('job-dialog').open`)
	if got := b.text("#job-selection"); !strings.Contains(got, `error like "payment gateway timeout after <num>ms"`) {
		t.Fatalf("the dialog restores %q", got)
	}
	b.set("#job-jq", ".payload.order.email |= ascii_downcas")
	b.run("preview a bad program", chromedp.Click("#job-preview-go"))
	b.wait("its error", `document.querySelector('#job-preview .caret') !== null`)
	if got := b.text("#job-preview"); !strings.Contains(got, "at column 25") || !strings.Contains(got, "function not defined: ascii_downcas/0") {
		t.Errorf("a bad program's preview says %q", got)
	}
	b.set("#job-jq", `.payload.order.email |= ascii_downcase | .headers.fixed = "email"`)
	b.run("keep the payloads' layout", chromedp.Click("#job-jq-keep"))
	b.run("preview", chromedp.Click("#job-preview-go"))
	b.wait("the diffs", `document.querySelectorAll('#job-preview pre').length === 3`)
	diff := b.text("#job-preview pre")
	for _, want := range []string{`"fixed": "email",`, `"email": "Customer`, `"email": "customer`, "@@ "} {
		if !strings.Contains(diff, want) {
			t.Errorf("the preview's first diff has no %q: %s", want, diff)
		}
	}
	if del, add := eval[int](b, `document.querySelectorAll('#job-preview pre:first-of-type .del').length`),
		eval[int](b, `document.querySelectorAll('#job-preview pre:first-of-type .add').length`); del != 1 || add != 2 {
		t.Errorf("the first diff marks %d lines removed and %d added, want 1 and 2", del, add)
	}
	b.view("console-preview.png")
	b.run("review the job", chromedp.Click("#job-next"))
	b.confirm(`error like "payment gateway timeout after <num>ms"`, "ascii_downcase", "keeping each payload's layout", "10,050 records")
	b.wait("the job on the page", `window.consoleState.tab === 'jobs' && window.consoleState.jobs.length === 1`)
	var job jobs.Job
	for j, err := range st.List(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		job = j
	}
	if job.Spec.Select != `error like "payment gateway timeout after <num>ms"` || !strings.Contains(job.Spec.JQ, "ascii_downcase") || !job.Spec.JQKeepLayout || job.Spec.Area != "ready" {
		t.Fatalf("the job in the store: %+v", job.Spec)
	}
}

// fmtCount formats n as the page does (10,050).
func fmtCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

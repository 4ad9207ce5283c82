package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/browsertest"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// shotDir is where the screenshots go: CONSOLE_SCREENSHOTS if set, else the
// test's artifact directory (kept with go test -artifacts -outputdir DIR).
func shotDir(t *testing.T) string {
	if d := os.Getenv("CONSOLE_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// browser is a headless chromium on a page of the console.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string

	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	var logMu sync.Mutex
	done := false
	t.Cleanup(func() { logMu.Lock(); done = true; logMu.Unlock() })
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if !done {
			t.Logf("chromedp: "+format, args...)
		}
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browsertest.Chromium(t)), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1500, 1000))
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{t: t, ctx: ctx, dir: shotDir(t)}
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.errors = append(b.errors, "exception: "+e.ExceptionDetails.Text+" "+fmt.Sprint(e.ExceptionDetails.Exception))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			// What the page told its user went wrong.
			if errs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.consoleState ? window.consoleState.errors : []`)); err == nil && len(errs) > 0 {
				t.Errorf("the page showed errors: %q", errs)
			}
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.errors) > 0 {
			t.Errorf("errors in the page:\n  %s", strings.Join(b.errors, "\n  "))
		}
	})
	return b
}

// run runs actions with a deadline.
//
// An action on a node the page replaced between finding it and acting on
// it ("Could not find node with given id": the jobs table re-renders as the
// jobs progress; it failed TestConsoleBrowser's cancel 1 run in 12) is run
// again when it is the only action: it failed before it acted.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
		err := chromedp.Do(ctx, actions...)
		cancel()
		if err != nil && len(actions) == 1 && strings.Contains(err.Error(), "Could not find node with given id") && attempt < 20 && b.ctx.Err() == nil {
			continue
		}
		if err != nil {
			b.t.Fatalf("%s: %v", what, err)
		}
		return
	}
}

// value runs an action that returns a value, with a deadline.
func value[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	return value(b, "evaluate "+js, chromedp.Evaluate[T](js))
}

// wait polls a JavaScript expression until it is true. A poll begun while
// the page's execution context was being replaced (right after a
// navigation, chromium may still name the old one) is begun again in the
// new one: "Cannot find context with specified id" failed
// TestConsoleFindReplay after its b.open on a loaded machine (issue 30).
func (b *browser) wait(what, js string) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(50*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err != nil && staleContext(err) && attempt < 20 && b.ctx.Err() == nil {
			continue
		}
		if err != nil {
			b.t.Fatalf("wait for %s: %v", what, err)
		}
		return
	}
}

// staleContext tells an error of a call made in an execution context the
// page has just replaced.
func staleContext(err error) bool {
	return strings.Contains(err.Error(), "Cannot find context with specified id") ||
		strings.Contains(err.Error(), "Execution context was destroyed")
}

// text returns the text of the first element matching a CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, `(document.querySelector(`+jsString(sel)+`) || {textContent: ''}).textContent`)
}

// set sets the value of a form field, as typing would.
func (b *browser) set(sel, v string) {
	b.t.Helper()
	eval[bool](b, `(() => { const e = document.querySelector(`+jsString(sel)+`); e.value = `+jsString(v)+`;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
}

// shot saves a screenshot of the whole page.
func (b *browser) shot(name string) {
	b.t.Helper()
	b.save(name, value(b, "screenshot", chromedp.FullScreenshot(100)))
}

// view saves a screenshot of what the window shows.
func (b *browser) view(name string) {
	b.t.Helper()
	b.save(name, value(b, "screenshot", chromedp.CaptureScreenshot()))
}

func (b *browser) save(name string, png []byte) {
	b.t.Helper()
	path := filepath.Join(b.dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// confirm answers the confirmation dialog, checking that it says want.
func (b *browser) confirm(want ...string) string {
	b.t.Helper()
	b.wait("the confirmation", `document.getElementById('confirm').open`)
	body := b.text("#confirm")
	for _, w := range want {
		if !strings.Contains(body, w) {
			b.t.Fatalf("the confirmation does not say %q: %q", w, body)
		}
	}
	b.run("confirm", chromedp.Click("#confirm-yes"))
	b.wait("the confirmation to close", `!document.getElementById('confirm').open`)
	return body
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// dest takes what a restore delivers: envelopes whose headers it checks.
type dest struct {
	mu      sync.Mutex
	n       int
	reasons map[string]int
}

func (d *dest) Enqueue(x any) error {
	env := x.(*dlqdump.Envelope)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reasons == nil {
		d.reasons = map[string]int{}
	}
	d.reasons[env.Headers[dlqdump.HeaderReason]]++
	d.n++
	return nil
}

func (d *dest) count() (int, map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := map[string]int{}
	for k, v := range d.reasons {
		r[k] = v
	}
	return d.n, r
}

// syncBuffer is a log the handler writes and the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The console in a real headless chromium over a store of 100,000 records:
// find a record by payload text and open it, see markup as text, restore a
// filtered selection with a job at 200 records/s, pause, resume and cancel
// it, release a quarantined segment; after each step what the page shows
// and what the store holds.
func TestConsoleBrowser(t *testing.T) {
	const n, needleAt = 100_000, 77_777
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: n, segment: 20_000, needleAt: needleAt, quarantine: 50})
	rd := &fs.Reader{Directory: dir}
	st, err := jobs.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	d := &dest{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{AsString: true}, Queue: d,
		DeliverEnvelope: true, CheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runner, err := jobs.NewRunner(st, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Owner: "test-runner", PollInterval: 100 * time.Millisecond,
		Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	logs := &syncBuffer{}
	srv, _ := serve(t, &console.Options{Reader: rd, Name: dir, Jobs: st, Restorer: r, SearchBudget: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})

	b := newBrowser(t)
	b.run("open the console", chromedp.Navigate(srv.URL+"/dlq/"))
	b.wait("the overview", `window.consoleState.ready && window.consoleState.overview !== null`)
	b.wait("the charts to count every segment", `window.consoleState.overview.charts.complete`)
	if got := b.text("#cards"); !strings.Contains(got, "100,000 records") || !strings.Contains(got, "50 records") {
		t.Fatalf("the overview cards say %q, want 100,000 ready and 50 quarantined records", got)
	}
	if got := b.text("#legend-reason"); !strings.Contains(got, "failed (33,350)") {
		t.Errorf("the reason chart's legend says %q, want failed (33,350)", got)
	}
	b.shot("overview.png")

	// Find a record by payload text, and open it.
	b.run("search the payloads", chromedp.Click("#tab-records"),
		chromedp.SendKeys("#search-q", needle), chromedp.Click("#search-go"))
	b.wait("the search to end", `window.consoleState.searchDone && !window.consoleState.searching`)
	found := eval[int](b, `window.consoleState.records.length`)
	if found != 1 {
		t.Fatalf("the payload search shows %d records, want 1", found)
	}
	if row := b.text("#rec-body tr"); !strings.Contains(row, needle) {
		t.Fatalf("the row says %q", row)
	}
	b.run("open the record", chromedp.Click("#rec-body tr"))
	b.wait("the record", `window.consoleState.detail !== null`)
	if hd, pl := b.text("#detail-headers"), b.text("#detail-payload"); !strings.Contains(hd, fmt.Sprint(needleAt)) || !strings.Contains(pl, `"oncall_note": "`+needle+`"`) {
		t.Fatalf("the record's view shows headers %q, payload %q", hd, pl)
	}
	b.shot("record.png")

	// A payload holding markup is shown as text.
	b.set("#search-q", "<script>")
	b.run("search for markup", chromedp.Click("#search-go"))
	b.wait("the markup search", `window.consoleState.searchDone && !window.consoleState.searching && window.consoleState.records.length === 1`)
	type cellState struct {
		Text    string
		HTML    string
		Scripts int
	}
	cell := eval[cellState](b, `(() => { const c = document.querySelector('#rec-body td.payload');
		return {Text: c.textContent, HTML: c.innerHTML, Scripts: document.querySelectorAll('main script, #rec-body *:not(td):not(tr)').length}; })()`)
	if cell.Text != markup || !strings.Contains(cell.HTML, "&lt;script&gt;") || cell.Scripts != 0 {
		t.Fatalf("a markup payload shows as text %q, HTML %q, %d elements made of it; want the text, escaped", cell.Text, cell.HTML, cell.Scripts)
	}
	b.run("open the markup record", chromedp.Click("#rec-body tr"))
	b.wait("its view", `document.getElementById('detail-payload').textContent === `+jsString(markup))

	// A job over a filtered selection at 200 records/s.
	b.set("#search-q", "")
	b.set("#search input[name=reason]", "failed")
	b.run("select reason=failed", chromedp.Click("#search-go"))
	b.wait("the filtered page", `!window.consoleState.searching && window.consoleState.records.length === 50`)
	b.run("open a record of the page", chromedp.Click("#rec-body tr:nth-child(3)"))
	b.wait("its view", `window.consoleState.detail && window.consoleState.detail.seq === window.consoleState.records[2].seq`)
	if hd := b.text("#detail-headers"); !strings.Contains(hd, "reasonfailed") {
		t.Fatalf("a record of the reason=failed page shows headers %q", hd)
	}
	b.view("records.png")
	b.run("new job", chromedp.Click("#job-new"))
	b.wait("the count", `document.getElementById('job-count').textContent.startsWith('It selects')`)
	if got := b.text("#job-count"); !strings.Contains(got, "33,334 records") {
		t.Fatalf("the job dialog counts %q, want 33,334 records (every third of 100,000)", got)
	}
	b.set("#job-rate", "200")
	b.run("review the job", chromedp.Click("#job-next"))
	b.confirm("reason = failed", "200 records per second", "33,334 records")
	b.wait("the job on the page", `window.consoleState.jobs.length === 1 && window.consoleState.jobs[0].state === 'running' && window.consoleState.jobs[0].delivered > 0`)
	var job jobs.Job
	for j, err := range st.List(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		job = j
	}
	if job.Spec.Rate != 200 || job.Spec.Select != "reason = failed" || job.Spec.Area != "ready" {
		t.Fatalf("the job in the store: %+v", job.Spec)
	}
	b.wait("an ETA", `window.consoleState.jobs[0].eta_s > 0`)
	b.shot("job-running.png")

	jobState := func() jobs.Job {
		j, err := st.Get(context.Background(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	// Pause: the runner stops at the next record and the job records what
	// was delivered.
	b.run("pause", chromedp.Click(`button[data-verb=pause]`))
	b.confirm("Pause job "+job.ID, "next record")
	b.wait("paused on the page", `window.consoleState.jobs[0].state === 'paused' && document.querySelector('#job-body .state').textContent === 'paused'`)
	paused := jobState()
	got, byReason := d.count()
	if paused.State != jobs.Paused || uint64(got) != paused.Delivered || byReason["failed"] != got {
		t.Fatalf("paused: store says %s with %d delivered; the destination got %d (%v)", paused.State, paused.Delivered, got, byReason)
	}
	b.shot("job-paused.png")

	// Resume: it goes on from there.
	b.run("resume", chromedp.Click(`button[data-verb=resume]`))
	b.confirm("Resume job " + job.ID)
	b.wait("delivering again", fmt.Sprintf(`window.consoleState.jobs[0].state === 'running' && window.consoleState.jobs[0].delivered > %d`, paused.Delivered))

	// The job's page: its spec, times, runner and what it delivered over
	// time, as this console read it.
	b.run("the job's page", chromedp.Click(`#job-body a`))
	b.wait("its history", `window.consoleState.tab === 'job' && window.consoleState.job && window.consoleState.job.history.length >= 4`)
	if kv := b.text("#jp-kv"); !strings.Contains(kv, "selectionready · reason = failed · at 200/s") || !strings.Contains(kv, "runnertest-runner") || !strings.Contains(kv, "passes2") {
		t.Errorf("the job's page says %q", kv)
	}
	if got := eval[string](b, `location.hash`); got != "#job?id="+job.ID {
		t.Errorf("the job page's URL: %s", got)
	}
	b.shot("job-page.png")
	b.run("back to the jobs", chromedp.Click("#job-back"))
	b.wait("the jobs", `window.consoleState.tab === 'jobs' && document.querySelectorAll('#job-body button[data-verb=cancel]').length === 1`)

	// Cancel: it ends for good, what it did not deliver stays.
	b.run("cancel", chromedp.Click(`#job-body button[data-verb=cancel]`))
	b.confirm("Cancel job "+job.ID, "stay where they are")
	b.wait("cancelled on the page", `window.consoleState.jobs[0].state === 'cancelled' && !document.querySelector('#job-body button[data-verb]')`)
	cancelled := jobState()
	got, byReason = d.count()
	if cancelled.State != jobs.Cancelled || uint64(got) != cancelled.Delivered || byReason["failed"] != got || got >= 33_334 || cancelled.Delivered <= paused.Delivered {
		t.Fatalf("cancelled: store says %s with %d delivered (%d when paused); the destination got %d (%v)",
			cancelled.State, cancelled.Delivered, paused.Delivered, got, byReason)
	}
	var left page
	getJSON(t, srv, "count", nil, &left)
	t.Logf("job %s: %d delivered at 200/s, then cancelled", job.ID, cancelled.Delivered)

	// Release the quarantined segment, chosen on the page.
	quar := names(t, dir, sink.AreaQuarantine)
	if len(quar) != 1 {
		t.Fatalf("quarantine: %v", quar)
	}
	var qname string
	for q := range quar {
		qname = q
	}
	b.run("the segments", chromedp.Click("#tab-segments"))
	b.set("#seg-area", "quarantine")
	b.wait("the quarantined segment", `window.consoleState.segments.length === 1 && window.consoleState.segments[0].area === 'quarantine'`)
	if row := b.text("#seg-body tr"); !strings.Contains(row, "version 2.0.0.0, restorer expects 1.0.0.0") || !strings.Contains(row, "50") {
		t.Fatalf("the quarantined segment's row says %q", row)
	}
	b.shot("quarantine.png")
	b.run("select it", chromedp.Click(`#seg-body input[type=checkbox]`), chromedp.Click("#seg-release"))
	b.confirm(qname, "50 records", "move back to the ready area")
	b.wait("an empty quarantine", `window.consoleState.segments.length === 0`)
	if names(t, dir, sink.AreaQuarantine)[qname] || !names(t, dir, sink.AreaReady)[qname] {
		t.Fatalf("segment %s was not released", qname)
	}

	// Every change is in the store's change log, on its page, and logged.
	b.run("the change log", chromedp.Click("#tab-log"))
	b.wait("the changes", `document.querySelectorAll('#log-body tr').length === 5`)
	acts := b.text("#log-body")
	for _, want := range []string{"job.create", "job.pause", "job.resume", "job.cancel", "release", "job " + job.ID, "released 1 of 1"} {
		if !strings.Contains(acts, want) {
			t.Errorf("the change log page lacks %q: %q", want, acts)
		}
	}
	for _, want := range []string{"console: job.create", "console: job.pause", "console: job.resume", "console: job.cancel", "console: release"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	b.shot("log.png")
}

// Read-only: no control on the page, and a POST forged from the page is
// refused and changes nothing.
func TestConsoleBrowserReadOnly(t *testing.T) {
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 2000, segment: 1000, needleAt: -1, quarantine: 20})
	rd := &fs.Reader{Directory: dir}
	st, err := jobs.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(context.Background(), jobs.Spec{ID: "waiting-job", At: time.Now().Add(time.Hour), Rate: 10}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serve(t, &console.Options{Reader: rd, Name: dir, ReadOnly: true})
	b := newBrowser(t)
	b.run("open the console", chromedp.Navigate(srv.URL+"/dlq/"))
	b.wait("the overview", `window.consoleState.ready && window.consoleState.overview !== null`)
	if got := b.text("#mode"); got != "read-only" {
		t.Errorf("the badge says %q", got)
	}
	b.run("jobs", chromedp.Click("#tab-jobs"))
	b.wait("the job", `window.consoleState.jobs.length === 1 && document.querySelectorAll('#job-body tr').length === 1`)
	b.run("the segments", chromedp.Click("#tab-segments"))
	b.set("#seg-area", "quarantine")
	b.wait("the quarantined segment", `window.consoleState.segments.length === 1 && window.consoleState.segments[0].area === 'quarantine'`)
	controls := eval[int](b, `document.querySelectorAll('#job-new, #seg-release, #seg-release-all, button[data-verb], #seg-body input[type=checkbox], .control').length`)
	if controls != 0 {
		t.Errorf("a read-only page has %d controls", controls)
	}
	b.shot("read-only.png")
	status := value(b, "a forged POST", chromedp.Evaluate[int](`fetch('api/release', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Dlqdump-Token': 'guess'}, body: '{"all":true}'}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if status != 403 {
		t.Errorf("a POST from the read-only page: %d, want 403", status)
	}
	if len(names(t, dir, sink.AreaQuarantine)) != 1 {
		t.Error("the forged POST released a segment")
	}
	j, err := st.Get(context.Background(), "waiting-job")
	if err != nil || j.State != jobs.Pending {
		t.Errorf("the job after the read-only page: %v, %v", j.State, err)
	}
}

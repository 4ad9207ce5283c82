package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// The order the on-call person looks for, its record's index, and records
// with values a list cannot show as they are.
const (
	orderX    = "ord-0777777"
	orderXAt  = 1234
	longErrAt = 40 // an error header of 10 KB
	bidiAt    = 41 // headers with U+202E and an escape sequence
)

var (
	longErr = "java.lang.IllegalStateException: payment gateway timeout after 30000ms\n" + strings.Repeat("\tat com.shop.payments.Gateway.charge(Gateway.java:412)\n", 180) // 10 KB
	bidi    = "ACME Ltd \u202Egpj.exe"
)

// makeOrders dumps n order events in segments of 1,000: JSON payloads with an
// order ID, headers reason, error and source.
func makeOrders(t *testing.T, dir string, n int) {
	t.Helper()
	errors := []string{"payment gateway timeout after 137ms", "connection refused", "HTTP 503 from billing", "invalid currency XBT"}
	for from := 0; from < n; from += 1000 {
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 16 * dlqdump.Megabyte})
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < min(n, from+1000); i++ {
			p := fmt.Sprintf(`{"order":{"id":"ord-%07d","amount":{"value":%d.%02d,"currency":"EUR"},"items":[{"sku":"SKU-%05d","qty":%d}]},"customer":{"email":"c%d@example.com"}}`,
				776543+i, 10+i%900, i%100, i*7%99999, 1+i%5, i%997)
			h := dlqdump.Headers{dlqdump.HeaderReason: []string{"failed", "leak", "deadline"}[i%3], dlqdump.HeaderError: errors[i%len(errors)], dlqdump.HeaderSource: "orders"}
			switch i {
			case longErrAt:
				h[dlqdump.HeaderError] = longErr
			case bidiAt:
				h["customer"] = bidi
				h[dlqdump.HeaderError] = "\x1b[31mdeclined\x1b[0m"
			}
			if err := q.Enqueue(dlqdump.Envelope{Item: []byte(p), Headers: h}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// collect is a destination that keeps what it got.
type collect struct {
	mu  sync.Mutex
	got []string
}

func (c *collect) Enqueue(x any) error {
	env := x.(*dlqdump.Envelope)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, string(env.Item.([]byte)))
	return nil
}

func (c *collect) items() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// open navigates to u from a blank page, as following a link does, and
// waits for the console to have started.
func (b *browser) open(u string) {
	b.t.Helper()
	b.run("leave", chromedp.Navigate("about:blank"))
	b.run("follow the link "+u, chromedp.Navigate(u))
	// Right after a navigation chromium may still name the old page's
	// execution context: ask again until the new page answers.
	deadline := time.Now().Add(50 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === 'complete' && !!window.consoleState && window.consoleState.ready === true`))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the console at %s did not start: %v", u, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// actConfirm answers the replay or discard dialog.
func (b *browser) actConfirm(reason string, want ...string) {
	b.t.Helper()
	b.wait("the dialog", `document.getElementById('act-dialog').open`)
	body := b.text("#act-dialog")
	for _, w := range want {
		if !strings.Contains(body, w) {
			b.t.Fatalf("the dialog does not say %q: %q", w, body)
		}
	}
	b.set("#act-reason", reason)
	b.run("confirm", chromedp.Click("#act-ok"))
	b.wait("the dialog to close", `!document.getElementById('act-dialog').open`)
}

type box struct{ Top, Bottom, Height, Inner float64 }

// TestConsoleFindReplay is the README's walk-through — find order X, open
// it, replay it — and then what an on-call person relies on around it: a
// link that reproduces the search, the record and the job; the job's page;
// the record's view in sight beside any row; long values cut in the list
// and whole in the view; control and bidi characters shown escaped; every
// form's time in UTC whatever the browser's zone; discarding a record; the
// change log page.
func TestConsoleFindReplay(t *testing.T) {
	dir := t.TempDir()
	makeOrders(t, dir, 3000)
	rd := &fs.Reader{Directory: dir}
	st, err := jobs.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	d := &collect{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: d,
		DeliverEnvelope: true, CheckInterval: time.Hour, Destinations: map[string]queue.Enqueuer{"orders": d}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runner, err := jobs.NewRunner(st, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Owner: "orders-runner@app-1", PollInterval: 100 * time.Millisecond, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	srv, _ := serve(t, &console.Options{Reader: rd, Name: "orders DLQ", Jobs: st, SearchBudget: 300 * time.Millisecond,
		Authorize: func(*http.Request) (console.Principal, error) {
			return console.Principal{Name: "alice@example.com", Role: console.RoleAdmin}, nil
		}})

	b := newBrowser(t)
	// The browser is in New York: every time typed is UTC all the same.
	b.run("a time zone", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "America/New_York"})
		return err
	}))
	b.run("open the console", chromedp.Navigate(srv.URL+"/dlq/"))
	b.wait("the overview", `window.consoleState.ready && window.consoleState.overview !== null`)

	// 1. Find order X.
	b.run("the records", chromedp.Click("#tab-records"))
	b.set("#search-select", `$.order.id = "`+orderX+`"`)
	b.run("search", chromedp.Click("#search-go"))
	b.wait("the order", `window.consoleState.searchDone && !window.consoleState.searching && window.consoleState.records.length === 1`)
	if row := b.text("#rec-body tr"); !strings.Contains(row, orderX) {
		t.Fatalf("the row says %q", row)
	}
	b.view("console-find-1-search.png")

	// 2. Open it: its ID, headers and payload, and what can be done.
	b.run("open the record", chromedp.Click("#rec-body tr"))
	b.wait("the record", `window.consoleState.detail !== null && !document.getElementById('detail').hidden`)
	id := eval[string](b, `window.consoleState.detail.id`)
	if !strings.Contains(b.text("#detail-payload"), orderX) || !strings.Contains(b.text("#detail-headers"), id) {
		t.Fatalf("the record's view: %q", b.text("#detail"))
	}
	recordURL := eval[string](b, `location.href`)
	if !strings.Contains(recordURL, "#records?select=") || !strings.Contains(recordURL, "record=ready%2F") {
		t.Fatalf("the URL of the open record: %s", recordURL)
	}
	b.view("console-find-2-record.png")

	// A link reproduces the search and the open record.
	b.open(recordURL)
	b.wait("the same record again", `window.consoleState.detail && window.consoleState.detail.id === `+jsString(id)+` && window.consoleState.records.length === 1`)
	if v := eval[string](b, `document.getElementById('search-select').value`); v != `$.order.id = "`+orderX+`"` {
		t.Fatalf("the link's search field: %q", v)
	}

	// 3. Replay it to the orders destination: a job due now, its page.
	b.run("replay", chromedp.Click("#rec-replay"))
	b.set("#act-dest", "orders")
	b.actConfirm("INC-1234: payments are back", id, "delivered once")
	b.wait("the job's page", `window.consoleState.tab === 'job' && window.consoleState.job && window.consoleState.job.job.state === 'completed'`)
	job := eval[string](b, `window.consoleState.job.job.id`)
	if got := d.items(); len(got) != 1 || !strings.Contains(got[0], orderX) {
		t.Fatalf("the destination got %q, want order %s once", got, orderX)
	}
	kv := b.text("#jp-kv")
	for _, want := range []string{"selectid = " + id, "destinationorders", "created", "started", "finished", "runnerorders-runner@app-1", "passes1", "1 delivered", "last error–"} {
		if !strings.Contains(kv, want) {
			t.Errorf("the job's page lacks %q: %q", want, kv)
		}
	}
	b.wait("the chart", `document.getElementById('jp-chart-note').textContent !== ''`)
	if lg := b.text("#jp-log"); !strings.Contains(lg, "alice@example.com (admin) · replay") || !strings.Contains(lg, "INC-1234") {
		t.Errorf("the job's page lists the changes %q", lg)
	}
	jobURL := eval[string](b, `location.href`)
	if !strings.HasSuffix(jobURL, "#job?id="+job) {
		t.Errorf("the job's URL: %s", jobURL)
	}
	b.view("console-find-3-replayed.png")
	b.open(jobURL)
	b.wait("the job's page again", `window.consoleState.tab === 'job' && window.consoleState.job && window.consoleState.job.job.id === `+jsString(job))

	// Long values: cut in the list, whole in the record's view; control
	// and bidi characters escaped in both. The view stays in sight.
	b.run("the records", chromedp.Click("#tab-records"))
	b.set("#search-select", "")
	b.run("every record", chromedp.Click("#search-go"))
	b.wait("a page", `!window.consoleState.searching && window.consoleState.records.length === 50`)
	row := func(i int) string { return fmt.Sprintf(`document.querySelectorAll('#rec-body tr')[%d]`, i) }
	h := eval[float64](b, row(longErrAt)+`.getBoundingClientRect().height`)
	cellText := eval[string](b, row(longErrAt)+`.querySelector('td.err').textContent`)
	if h > 60 || len(cellText) > 200 {
		t.Errorf("the row of a 10 KB error is %.0f px tall and shows %d characters, want one line cut short", h, len(cellText))
	}
	bidiRow := eval[string](b, row(bidiAt)+`.textContent`)
	if strings.ContainsAny(bidiRow, "\u202e\x1b") || !strings.Contains(bidiRow, `\u001b[31mdeclined`) {
		t.Errorf("the row with an escape sequence shows %q", bidiRow)
	}
	eval[bool](b, `(`+row(longErrAt)+`.scrollIntoView({block: 'end'}), true)`)
	b.run("open it", chromedp.Click(`#rec-body tr:nth-child(`+fmt.Sprint(longErrAt+1)+`)`))
	b.wait("its view", `window.consoleState.detail && window.consoleState.detail.headers.error.length > 9000`)
	view := eval[box](b, `(() => { const r = document.getElementById('detail').getBoundingClientRect(); return {Top: r.top, Bottom: r.bottom, Height: r.height, Inner: window.innerHeight}; })()`)
	if view.Top < 0 || view.Top > view.Inner/2 || view.Bottom <= 0 {
		t.Errorf("the record's view of a row far down the list is at %+v: out of sight", view)
	}
	if whole := eval[int](b, `Array.from(document.querySelectorAll('#detail-headers tr')).find(tr => tr.firstChild.textContent === 'error').lastChild.textContent.length`); whole != len(longErr) {
		t.Errorf("the record's view shows %d characters of the error, want all %d", whole, len(longErr))
	}
	b.view("console-long-value.png")
	b.run("open the bidi record", chromedp.Click(`#rec-body tr:nth-child(`+fmt.Sprint(bidiAt+1)+`)`))
	b.wait("its view", `window.consoleState.detail && window.consoleState.detail.headers.customer !== undefined`)
	hd := b.text("#detail-headers")
	if strings.ContainsAny(hd, "\u202e\x1b") || !strings.Contains(hd, `ACME Ltd \u202egpj.exe`) {
		t.Errorf("the view of a header with U+202E shows %q", hd)
	}
	b.view("console-escaped.png")

	// One time rule: "20:14" in a search and in a job's start are both
	// 20:14 UTC, and say so, in a browser in New York.
	b.set("#search input[name=since]", "2026-03-01T20:14")
	if hint := b.text("#search label:nth-of-type(3) .tzhint"); !strings.Contains(hint, "15:14:00 your time (UTC-05:00)") {
		t.Errorf("the hint beside Since says %q", hint)
	}
	b.run("search since", chromedp.Click("#search-go"))
	if since := eval[string](b, `window.consoleState.search.get('since')`); since != "2026-03-01T20:14:00.000Z" {
		t.Errorf("Since 20:14 was sent as %s", since)
	}
	b.set("#search input[name=since]", "")
	b.set("#search-select", "reason = leak")
	b.run("search", chromedp.Click("#search-go"))
	b.wait("a page", `!window.consoleState.searching && window.consoleState.records.length === 50`)
	b.run("new job", chromedp.Click("#job-new"))
	b.set("#job-at", "2030-03-01T20:14")
	b.set("#job-rate", "50")
	b.run("review", chromedp.Click("#job-next"))
	b.confirm("2030-03-01 20:14:00Z (UTC)")
	b.wait("the job on the list", `window.consoleState.tab === 'jobs' && window.consoleState.jobs.some(j => j.state === 'pending')`)
	var sched jobs.Job
	for j, err := range st.List(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if j.State == jobs.Pending {
			sched = j
		}
	}
	if want := time.Date(2030, 3, 1, 20, 14, 0, 0, time.UTC); !sched.At.Equal(want) {
		t.Errorf("Start at 20:14 made a job due %s, want %s", sched.At, want)
	}
	due := b.text(`#job-body tr[data-job="` + sched.ID + `"] td.due`)
	if !strings.HasPrefix(due, "in ") || !strings.Contains(due, "2030-03-01 20:14:00Z") {
		t.Errorf("the scheduled job's due time shows %q", due)
	}
	b.view("console-jobs-due.png")

	// Discard a record: out of the ready area, into the quarantine with
	// who and why.
	b.run("the records", chromedp.Click("#tab-records"))
	b.set("#search-select", `$.order.id = "ord-0776600"`)
	b.run("search", chromedp.Click("#search-go"))
	b.wait("the order", `window.consoleState.searchDone && !window.consoleState.searching && window.consoleState.records.length === 1`)
	b.run("open it", chromedp.Click("#rec-body tr"))
	b.wait("its view", `window.consoleState.detail !== null && !document.getElementById('detail').hidden`)
	discarded := eval[string](b, `window.consoleState.detail.id`)
	b.run("discard", chromedp.Click("#rec-discard"))
	b.actConfirm("duplicate of ord-0776599, refunded by hand", discarded, "Nothing is deleted")
	b.wait("the search again, empty", `window.consoleState.searchDone && !window.consoleState.searching && window.consoleState.records.length === 0`)
	var q page
	getJSON(t, srv, "records", urlValues("area", "quarantine", "select", "id = "+discarded), &q)
	if len(q.Records) != 1 || q.Records[0].Headers[dlqdump.HeaderQuarantine] != "discarded: by alice@example.com: duplicate of ord-0776599, refunded by hand" {
		t.Fatalf("the discarded record in the quarantine: %+v", q.Records)
	}

	// The change log page: each change with who, and a link to it.
	b.run("the change log", chromedp.Click("#tab-log"))
	b.wait("the entries", `document.querySelectorAll('#log-body tr').length === 3`)
	lg := b.text("#log-body")
	for _, want := range []string{"discard", "records " + discarded, "job.create", "replay", "records " + id, "alice@example.com (admin) · console", "INC-1234"} {
		if !strings.Contains(lg, want) {
			t.Errorf("the change log page lacks %q: %q", want, lg)
		}
	}
	b.run("verify", chromedp.Click("#log-verify"))
	b.wait("the verdict", `document.getElementById('log-status').textContent.includes('chain is intact')`)
	b.set("#log-form select[name=action]", "replay")
	b.run("filter", chromedp.Click("#log-go"))
	b.wait("one entry", `document.querySelectorAll('#log-body tr').length === 1`)
	logURL := eval[string](b, `location.href`)
	if !strings.HasSuffix(logURL, "#log?action=replay") {
		t.Errorf("the filtered log's URL: %s", logURL)
	}
	b.view("console-log.png")
	b.open(logURL)
	b.wait("the filtered log again", `window.consoleState.tab === 'log' && document.querySelectorAll('#log-body tr').length === 1`)

	l, err := changelog.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.Verify(context.Background(), changelog.VerifyOptions{})
	if err != nil || v.Entries != 3 {
		t.Fatalf("the change log: %+v, %v", v, err)
	}
	if len(names(t, dir, sink.AreaQuarantine)) != 1 {
		t.Errorf("quarantine: %v", names(t, dir, sink.AreaQuarantine))
	}
}

// A viewer sees everything and no control; the server refuses what a page
// could forge.
func TestConsoleBrowserViewer(t *testing.T) {
	dir := t.TempDir()
	makeOrders(t, dir, 200)
	rd := &fs.Reader{Directory: dir}
	srv, _ := serve(t, &console.Options{Reader: rd, Name: "orders DLQ",
		Authorize: func(*http.Request) (console.Principal, error) {
			return console.Principal{Name: "victor@example.com", Role: console.RoleViewer}, nil
		}})
	b := newBrowser(t)
	b.run("open a record by its link", chromedp.Navigate(srv.URL+"/dlq/#records?select=reason+%3D+failed"))
	b.wait("the records", `window.consoleState.ready && !window.consoleState.searching && window.consoleState.records.length > 0`)
	b.run("open one", chromedp.Click("#rec-body tr"))
	b.wait("its view", `window.consoleState.detail !== null`)
	if got := b.text("#user"); got != "victor@example.com · viewer" {
		t.Errorf("the header says %q", got)
	}
	controls := eval[int](b, `document.querySelectorAll('#job-new, #seg-release, #seg-release-all, #rec-replay, #rec-discard, button[data-verb], .control').length`)
	if controls != 0 {
		t.Errorf("a viewer's page has %d controls", controls)
	}
	b.view("console-viewer.png")
	id := eval[string](b, `window.consoleState.detail.id`)
	for _, c := range []struct{ path, body string }{{"replay", `{"ids":["` + id + `"]}`}, {"discard", `{"ids":["` + id + `"],"reason":"x"}`}, {"jobs", `{}`}} {
		status := value(b, "a forged POST", chromedp.Evaluate[int](`fetch('api/`+c.path+`', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: `+jsString(c.body)+`}).then(r => r.status)`,
			chromedp.EvalAwaitPromise))
		if status != 403 {
			t.Errorf("a viewer's POST %s: %d, want 403", c.path, status)
		}
	}
}

func urlValues(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

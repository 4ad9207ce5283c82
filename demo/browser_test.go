package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/dlqdump/dlqdump/internal/browsertest"
)

// screenshotPath is where the dashboard's screenshot goes: DEMO_SCREENSHOT if
// set, else the test's artifact directory, which is kept with
// `go test -artifacts -outputdir DIR` (an existing DIR) and is temporary
// otherwise. The test logs the path.
func screenshotPath(t *testing.T) string {
	if p := os.Getenv("DEMO_SCREENSHOT"); p != "" {
		return p
	}
	return filepath.Join(t.ArtifactDir(), "dashboard.png")
}

// consoleLog collects what the page writes to its console.
type consoleLog struct {
	mu     sync.Mutex
	errors []string
	all    []string
}

func (c *consoleLog) listen(ev any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range e.Args {
			if len(a.Value) > 0 {
				parts = append(parts, string(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		line := fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " "))
		c.all = append(c.all, line)
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			c.errors = append(c.errors, line)
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		line := "exception: " + d.Text
		if d.Exception != nil {
			line += " " + d.Exception.Description
		}
		line += fmt.Sprintf(" at %s:%d:%d", d.URL, d.LineNumber, d.ColumnNumber)
		c.all = append(c.all, line)
		c.errors = append(c.errors, line)
	case *log.EventEntryAdded:
		line := fmt.Sprintf("log.%s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL)
		c.all = append(c.all, line)
		if e.Entry.Level == log.EntryLevelError {
			c.errors = append(c.errors, line)
		}
	}
}

func (c *consoleLog) snapshot() (errs, all []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errors...), append([]string(nil), c.all...)
}

// The dashboard in a real headless browser: it loads without console errors,
// its charts fill with data, the producer button works, and a screenshot is
// written.
func TestDashboardBrowser(t *testing.T) {
	bin := browsertest.Chromium(t)
	// chromedp may log from its goroutines; nothing reaches t after the test.
	var logMu sync.Mutex
	testDone := false
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if !testDone {
			t.Logf("chromedp: "+format, args...)
		}
	}
	defer func() {
		logMu.Lock()
		testDone = true
		logMu.Unlock()
	}()
	cfg := defaultSceneConfig()
	cfg.Capacity = 200
	cfg.Workers = 2
	cfg.WorkerDelay = duration(2 * time.Millisecond)
	cfg.FailRate = 0.3
	cfg.MaxRetries = 1
	cfg.Producers = 2
	cfg.ProducersMax = 8
	cfg.Rate = 250
	cfg.Deadline = duration(100 * time.Millisecond)
	cfg.Flush = duration(300 * time.Millisecond)
	cfg.RestoreInterval = duration(500 * time.Millisecond)
	cfg.SegmentSize = byteSize(64 << 10)
	app, _ := newTestApp(t, &cfg, func(o *AppOptions) { o.SampleDur = 250 * time.Millisecond })
	srv := serve(t, app)

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1100),
	)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	defer cancelCtx()

	// Start the browser (no timeout on the first Run: it would end the browser).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	console := &consoleLog{}
	if err := chromedp.Listen(ctx, console.listen); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	defer func() {
		errs, all := console.snapshot()
		if t.Failed() || len(errs) > 0 {
			t.Logf("browser console:\n  %s", strings.Join(all, "\n  "))
		}
	}()

	if err := chromedp.Do(tctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible("#chart-rates"),
	); err != nil {
		t.Fatalf("load the dashboard: %v", err)
	}

	// Wait until the charts hold a few seconds of non-zero data.
	type chartState struct {
		Polls, Samples                  int
		Fill, Produced, Processed, Rmax float64
		Points                          int
		Producers                       int
	}
	read := func() chartState {
		t.Helper()
		v, err := chromedp.Run(tctx, chromedp.Evaluate[chartState](`(() => {
			const d = window.dashboard;
			return {Polls: d.polls, Samples: d.samples.length,
				Fill: d.charts.fill.max, Produced: d.charts.rates.latest.produced_ps || 0,
				Processed: d.charts.rates.latest.processed_ps || 0, Rmax: d.charts.rates.max,
				Points: d.charts.rates.points, Producers: d.producers === null ? -1 : d.producers};
		})()`))
		if err != nil {
			t.Fatalf("read the dashboard state: %v", err)
		}
		return v
	}
	var st chartState
	deadline := time.Now().Add(20 * time.Second)
	for {
		st = read()
		if st.Polls >= 3 && st.Points >= 8 && st.Produced > 0 && st.Processed > 0 && st.Rmax > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the charts show no data: %+v", st)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("dashboard state: %+v", st)

	// The canvas itself has the produced series drawn on it: count pixels
	// of its colour (#2f6fde).
	pixels, err := chromedp.Run(tctx, chromedp.Evaluate[int](`(() => {
		const c = document.getElementById('chart-rates');
		const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
		let n = 0;
		for (let i = 0; i < d.length; i += 4) {
			if (d[i+3] > 200 && Math.abs(d[i]-0x2f) < 40 && Math.abs(d[i+1]-0x6f) < 40 && Math.abs(d[i+2]-0xde) < 40) n++;
		}
		return n;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rates chart: %d pixels of the produced series", pixels)
	if pixels < 50 {
		t.Errorf("the rates chart has %d pixels of the produced series, want a line", pixels)
	}

	// The producer button adds a producer: on the page and in the scene.
	before := int(app.current().prodUp.Load())
	if err := chromedp.Do(tctx, chromedp.Click("#producer-up")); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(tctx, chromedp.Poll[int](`window.dashboard.producers === `+fmt.Sprint(before+1)+` ? window.dashboard.producers : null`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatalf("producer count on the page did not become %d: %v (state %+v)", before+1, err, read())
	}
	text, err := chromedp.Run(tctx, chromedp.Text("#producers"))
	if err != nil {
		t.Fatal(err)
	}
	if got := int(app.current().prodUp.Load()); got != before+1 || shown != before+1 || strings.TrimSpace(text) != fmt.Sprint(before+1) {
		t.Fatalf("after a click: scene has %d producers, page state %d, page text %q; want %d", got, shown, text, before+1)
	}

	// The segment table lists what the dump published.
	time.Sleep(2500 * time.Millisecond) // a segment poll, and more data on the charts
	rows, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll('#segments tr').length`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("segment table rows: %d", rows)

	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := screenshotPath(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("the screenshot is not a PNG (%d bytes)", len(png))
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))

	if errs, _ := console.snapshot(); len(errs) > 0 {
		t.Errorf("console errors:\n  %s", strings.Join(errs, "\n  "))
	}
}

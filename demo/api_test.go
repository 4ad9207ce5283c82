package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	dsink "github.com/dlqdump/dlqdump/sink"
)

func TestHealthz(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	code, b := do(t, "GET", srv.URL+"/healthz", "")
	if code != http.StatusOK {
		t.Fatalf("GET /healthz: %d %s", code, b)
	}
	if v := decode[map[string]string](t, b); v["status"] != "ok" || v["scene"] != "running" {
		t.Fatalf("GET /healthz: %s", b)
	}
}

func TestEnqueueStatusCodes(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	url := srv.URL + "/enqueue"

	code, b := do(t, "POST", url, `{"id":"t1","payload":"any","max_retries":3}`)
	if code != http.StatusAccepted {
		t.Fatalf("accepted: got %d %s", code, b)
	}
	if v := decode[map[string]string](t, b); v["id"] != "t1" {
		t.Fatalf("accepted: body %s, want id t1", b)
	}

	code, b = do(t, "POST", url, `{"id":"t1","payload":"again"}`)
	if code != http.StatusConflict {
		t.Fatalf("duplicate: got %d %s, want 409", code, b)
	}

	badJSON := []string{`{`, `not json`, `[]`, `{"id":"x"} {"id":"y"}`, `{"id":"x","payload":"p","extra":1}`, `{"id":42}`, ``}
	for _, body := range badJSON {
		if code, b := do(t, "POST", url, body); code != http.StatusBadRequest {
			t.Errorf("bad JSON %q: got %d %s, want 400", body, code, b)
		}
	}
	badFields := []string{
		`{"payload":"no id"}`,
		`{"id":"","payload":"p"}`,
		`{"id":"has space"}`,
		`{"id":"-leading-symbol"}`,
		`{"id":"` + strings.Repeat("x", 129) + `"}`,
		`{"id":"neg","max_retries":-1}`,
		`{"id":"big","max_retries":101}`,
	}
	for _, body := range badFields {
		if code, b := do(t, "POST", url, body); code != http.StatusBadRequest {
			t.Errorf("bad fields %s: got %d %s, want 400", body, code, b)
		}
	}
	// Rejected requests leave no task behind.
	if code, b := do(t, "GET", srv.URL+"/tasks/neg", ""); code != http.StatusNotFound {
		t.Errorf("GET /tasks/neg after a 400: %d %s, want 404", code, b)
	}

	// A payload that is not a string is kept as its JSON text.
	if code, b := do(t, "POST", url, `{"id":"obj","payload":{"order":1}}`); code != http.StatusAccepted {
		t.Errorf("object payload: %d %s", code, b)
	}
	if code, b := do(t, "GET", url, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /enqueue: %d %s, want 405", code, b)
	}

	// 503: the queue refuses (the scene is stopped).
	code, b = do(t, "POST", srv.URL+"/api/v1/stop", "")
	if code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, b)
	}
	// The stop says where every accepted task is.
	if v := decode[struct {
		Message string
		Tasks   ledger
	}](t, b); v.Message != "success" || !v.Tasks.OK() || v.Tasks.Accepted != 2 || v.Tasks.Done+v.Tasks.InDump != 2 {
		t.Errorf("stop: %s", b)
	}
	code, b = do(t, "POST", url, `{"id":"late","payload":"p"}`)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("after stop: got %d %s, want 503", code, b)
	}
	if code, _ := do(t, "GET", srv.URL+"/tasks/late", ""); code != http.StatusNotFound {
		t.Errorf("a refused task is remembered: GET /tasks/late = %d", code)
	}
	if code, b := do(t, "GET", srv.URL+"/healthz", ""); code != http.StatusOK {
		t.Errorf("healthz while idle: %d %s", code, b)
	}
}

func TestEnqueueRefusedWhileClosing(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	s := app.current()
	// Close the gate as the shutdown does, while the scene is still current.
	s.gate.Lock()
	s.closed = true
	s.gate.Unlock()
	code, b := do(t, "POST", srv.URL+"/enqueue", `{"id":"c1","payload":"p"}`)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("got %d %s, want 503", code, b)
	}
	s.gate.Lock()
	s.closed = false
	s.gate.Unlock()
}

func TestTaskUnknown(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	code, b := do(t, "GET", srv.URL+"/tasks/nope", "")
	if code != http.StatusNotFound {
		t.Fatalf("got %d %s, want 404", code, b)
	}
}

func TestTaskDone(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	if code, b := do(t, "POST", srv.URL+"/enqueue", `{"id":"ok1","payload":"!sleep=150ms"}`); code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", code, b)
	}
	waitTask(t, srv.URL, "ok1", 5*time.Second, func(v taskView) bool { return v.Status == "running" })
	v := waitTask(t, srv.URL, "ok1", 5*time.Second, func(v taskView) bool { return v.Status == "done" })
	if got := states(v); !inOrder(got, []string{"queued", "running", "done"}) {
		t.Fatalf("history %v", got)
	}
	if v.Attempts != 1 || v.Dumps != 0 {
		t.Fatalf("attempts %d dumps %d, want 1 and 0", v.Attempts, v.Dumps)
	}
}

// A task that finds the queue full is dumped ("leak"), restored when the
// queue has room, and processed.
func TestTaskLeakRestored(t *testing.T) {
	cfg := testConfig()
	cfg.Capacity = 2
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	post := func(id, payload string) map[string]string {
		t.Helper()
		code, b := do(t, "POST", srv.URL+"/enqueue", fmt.Sprintf(`{"id":%q,"payload":%q}`, id, payload))
		if code != http.StatusAccepted {
			t.Fatalf("enqueue %s: %d %s", id, code, b)
		}
		return decode[map[string]string](t, b)
	}
	post("busy", "!sleep=700ms")
	waitTask(t, srv.URL, "busy", 5*time.Second, func(v taskView) bool { return v.Status == "running" })
	post("fill1", "!ok")
	post("fill2", "!ok")
	if r := post("leak1", "!ok"); r["status"] != "dumped" {
		t.Fatalf("the queue is full: the task should be dumped, got %v", r)
	}
	v := waitTask(t, srv.URL, "leak1", time.Second, func(v taskView) bool { return v.Status == "dumped" })
	if v.Reason != "leak" {
		t.Fatalf("reason %q, want leak", v.Reason)
	}
	v = waitTask(t, srv.URL, "leak1", 10*time.Second, func(v taskView) bool { return v.Status == "done" })
	if got := states(v); !inOrder(got, []string{"queued", "dumped", "restored", "running", "done"}) {
		t.Fatalf("history %v", got)
	}
	if v.Restores != 1 || v.Dumps != 1 {
		t.Fatalf("restores %d dumps %d, want 1 and 1", v.Restores, v.Dumps)
	}
}

// A task that always fails is retried with backoff, dumped as "failed",
// restored, fails again, and after MaxReplays is quarantined; the dump
// stored the reason, the attempts and the error beside it.
func TestTaskFailedQuarantined(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	if code, b := do(t, "POST", srv.URL+"/enqueue", `{"id":"bad1","payload":"!fail","max_retries":1}`); code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", code, b)
	}
	v := waitTask(t, srv.URL, "bad1", 20*time.Second, func(v taskView) bool { return v.Status == "quarantined" })
	want := []string{"queued", "running", "queued", "running", "failed", "dumped", "restored", "running", "failed", "dumped", "restored", "running", "failed", "dumped", "quarantined"}
	if got := states(v); !inOrder(got, want) {
		t.Fatalf("history %v, want %v in order", got, want)
	}
	if v.Reason != "failed" || v.Dumps != 3 || v.Restores != 2 || v.Attempts != 6 || v.Replays != 2 {
		t.Fatalf("task %+v: want reason failed, 3 dumps, 2 restores, 6 attempts, 2 replays", v)
	}
	if !strings.Contains(v.LastError, "failed") {
		t.Fatalf("last error %q", v.LastError)
	}

	// The quarantined record carries the headers.
	ctx := context.Background()
	var found bool
	for si, err := range app.sink.reader.List(ctx, dsink.AreaQuarantine) {
		if err != nil {
			t.Fatal(err)
		}
		f, err := app.sink.reader.Open(ctx, dsink.AreaQuarantine, si.Name)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := segment.NewReader(f, f.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			var r record
			if err := json.Unmarshal(rec.Payload, &r); err != nil || r.ID != "bad1" {
				continue
			}
			found = true
			h := rec.Headers.Map()
			if h[dlqdump.HeaderReason] != "failed" || h[dlqdump.HeaderAttempts] != "6" || h[dlqdump.HeaderReplays] != "2" ||
				!strings.Contains(h[dlqdump.HeaderError], "failed") || h[dlqdump.HeaderSource] != "demo" ||
				!strings.Contains(h[dlqdump.HeaderQuarantine], "replayed") {
				t.Errorf("quarantined record headers %v", h)
			}
		}
		f.Close()
	}
	if !found {
		t.Fatal("the quarantined record of bad1 is not in the quarantine area")
	}
}

// A task that waits in the queue past its deadline is dumped as "deadline".
func TestTaskDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.Deadline = duration(50 * time.Millisecond)
	cfg.AutoRestore = false
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	if code, b := do(t, "POST", srv.URL+"/enqueue", `{"id":"slow","payload":"!sleep=500ms"}`); code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", code, b)
	}
	waitTask(t, srv.URL, "slow", 5*time.Second, func(v taskView) bool { return v.Status == "running" })
	if code, b := do(t, "POST", srv.URL+"/enqueue", `{"id":"late","payload":"!ok"}`); code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", code, b)
	}
	v := waitTask(t, srv.URL, "late", 5*time.Second, func(v taskView) bool { return v.Status == "dumped" })
	if v.Reason != "deadline" {
		t.Fatalf("reason %q, want deadline", v.Reason)
	}
	// A manual restore pass brings it back.
	if code, b := do(t, "POST", srv.URL+"/api/v1/restore", ""); code != http.StatusAccepted {
		t.Fatalf("restore: %d %s", code, b)
	}
	waitTask(t, srv.URL, "late", 10*time.Second, func(v taskView) bool { return v.Status == "done" })
}

func TestScenarioControl(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	api := srv.URL + "/api/v1/"
	expect := func(method, path, body string, want int) []byte {
		t.Helper()
		code, b := do(t, method, api+path, body)
		if code != want {
			t.Fatalf("%s %s: got %d %s, want %d", method, path, code, b, want)
		}
		return b
	}
	producers := func(b []byte) int { return int(decode[map[string]any](t, b)["producers"].(float64)) }

	expect("POST", "init", `{}`, http.StatusConflict)
	if n := producers(expect("POST", "producer-up", "", http.StatusOK)); n != 1 {
		t.Fatalf("producer-up: %d producers", n)
	}
	if n := producers(expect("GET", "producer-up?key=demo&delta=2", "", http.StatusOK)); n != 3 {
		t.Fatalf("producer-up delta=2: %d producers", n)
	}
	expect("POST", "producer-up?delta=5", "", http.StatusConflict) // past producers_max
	expect("POST", "producer-up?delta=abc", "", http.StatusBadRequest)
	if n := producers(expect("POST", "producer-down?delta=3", "", http.StatusOK)); n != 0 {
		t.Fatalf("producer-down: %d producers", n)
	}
	expect("POST", "producer-down", "", http.StatusConflict)
	expect("GET", "status", "", http.StatusOK)
	expect("GET", "stats", "", http.StatusOK)
	expect("GET", "segments", "", http.StatusOK)
	expect("POST", "flush", "", http.StatusOK)
	expect("POST", "stop", "", http.StatusOK)
	expect("POST", "stop", "", http.StatusConflict)
	expect("POST", "producer-up", "", http.StatusConflict)
	expect("POST", "restore", "", http.StatusConflict)
	expect("POST", "init", `{`, http.StatusBadRequest)
	expect("POST", "init", `{"capacity":0}`, http.StatusBadRequest)
	expect("POST", "init", `{"no_such_field":1}`, http.StatusBadRequest)
	b := expect("POST", "init", `{"workers":2,"worker_delay":"2ms","producers":1,"rate":50}`, http.StatusOK)
	if c := decode[struct{ Config SceneConfig }](t, b).Config; c.Workers != 2 || c.WorkerDelay.D() != 2*time.Millisecond || c.Capacity != cfg.Capacity {
		t.Fatalf("init config %+v", c)
	}
	st := decode[map[string]any](t, expect("GET", "status", "", http.StatusOK))
	if st["running"] != true {
		t.Fatalf("status after init: %v", st)
	}
	expect("POST", "force-stop", "", http.StatusOK)
}

func TestMetricsEndpoint(t *testing.T) {
	cfg := testConfig()
	cfg.Capacity = 1
	cfg.AutoRestore = false
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	do(t, "POST", srv.URL+"/enqueue", `{"id":"m1","payload":"!sleep=1s"}`)
	waitTask(t, srv.URL, "m1", 5*time.Second, func(v taskView) bool { return v.Status == "running" })
	do(t, "POST", srv.URL+"/enqueue", `{"id":"m2","payload":"!ok"}`)
	do(t, "POST", srv.URL+"/enqueue", `{"id":"m3","payload":"!ok"}`) // leaks
	code, b := do(t, "GET", srv.URL+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	text := string(b)
	for _, want := range []string{
		`dlqdump_dumped_records_total{queue="demo"} 1`,
		`demo_dead_letters_total{reason="leak"} 1`,
		`demo_tasks_produced_total 3`,
		`demo_queue_capacity 1`,
		`demo_tasks{state="dumped"} 1`,
		`dlqdump_pending_bytes{queue="demo"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

func TestDashboardFiles(t *testing.T) {
	app, _ := newTestApp(t, nil)
	srv := serve(t, app)
	for path, want := range map[string]string{"/": "<canvas id=\"chart-rates\"", "/app.js": "window.dashboard", "/chart.js": "MiniChart", "/style.css": ".charts"} {
		code, b := do(t, "GET", srv.URL+path, "")
		if code != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, contains %q: %v", path, code, want, strings.Contains(string(b), want))
		}
	}
	// Nothing is fetched from elsewhere.
	for _, path := range []string{"/", "/app.js", "/chart.js", "/style.css"} {
		_, b := do(t, "GET", srv.URL+path, "")
		if strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
			t.Errorf("%s refers to another site", path)
		}
	}
}

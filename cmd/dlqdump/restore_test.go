package main

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// target is an HTTP endpoint to restore into. refuse decides, from how many
// times a payload was offered before, the status of an answer.
type target struct {
	*httptest.Server
	refuse func(body string, attempt int) int

	mu        sync.Mutex
	requests  int
	onRequest func(n int)    // called with the count of requests, before answering
	attempts  map[string]int // requests per payload
	delivered map[string]int // 2xx answers per payload
	headers   map[string]http.Header
}

// deliveredNow returns a copy of the deliveries per payload.
func (tg *target) deliveredNow() map[string]int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return maps.Clone(tg.delivered)
}

// requestsNow returns the count of requests so far.
func (tg *target) requestsNow() int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.requests
}

// setOnRequest sets the function called with the count of requests.
func (tg *target) setOnRequest(f func(n int)) {
	tg.mu.Lock()
	tg.onRequest = f
	tg.mu.Unlock()
}

// attemptsNow returns a copy of the requests per payload.
func (tg *target) attemptsNow() map[string]int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return maps.Clone(tg.attempts)
}

// headersOf returns the headers a payload was delivered with.
func (tg *target) headersOf(payload string) http.Header {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.headers[payload]
}

func newTarget(t *testing.T, refuse func(body string, attempt int) int) *target {
	tg := &target{refuse: refuse, attempts: map[string]int{}, delivered: map[string]int{}, headers: map[string]http.Header{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		body := string(b)
		tg.mu.Lock()
		attempt := tg.attempts[body]
		tg.attempts[body]++
		code := http.StatusOK
		if tg.refuse != nil {
			code = tg.refuse(body, attempt)
		}
		if code < 300 {
			tg.delivered[body]++
			tg.headers[body] = r.Header.Clone()
		}
		tg.requests++
		n, hook := tg.requests, tg.onRequest
		tg.mu.Unlock()
		if hook != nil {
			hook(n)
		}
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(code)
		if code >= 300 {
			io.WriteString(w, "try again later")
		}
	}))
	t.Cleanup(tg.Close)
	return tg
}

// samplePayloads returns the payloads of the ready records of the sample.
func samplePayloads() []string {
	var p []string
	for _, s := range []*segSpec{&segA, &segB, &segC} {
		for _, r := range s.records {
			p = append(p, string(r.payload))
		}
	}
	return p
}

// areaNames lists the segment names of an area of a dump directory.
func areaNames(t *testing.T, dir string, area sink.Area) []string {
	t.Helper()
	d := segPath(dir, area, "")
	entries, err := os.ReadDir(d)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".dlq") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestRestoreStdout(t *testing.T) {
	dir := makeSample(t)
	r := cli(t, 0, "restore", dir)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != sampleReady {
		t.Fatalf("%d lines, want %d; %s", len(lines), sampleReady, r)
	}
	// Segments in flight deliver side by side: each keeps its order, the
	// lines of two segments interleave. Segment A's first record:
	var first deliveredJSON
	found := false
	for _, line := range lines {
		var d deliveredJSON
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		if d.Payload == string(segA.records[0].payload) {
			first, found = d, true
			break
		}
	}
	if !found || first.Headers["reason"] != "failed" || first.Headers["replays"] != "1" {
		t.Errorf("segment A's first record: %+v (found: %v)", first, found)
	}
	if !strings.Contains(r.stdout, `"payload":"AAH+/xCA","payload_base64":true`) {
		t.Errorf("binary payload not in base64: %s", r)
	}
	if !strings.Contains(r.stderr, "restored 20 records") {
		t.Errorf("no report: %s", r)
	}
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 0 {
		t.Errorf("ready segments left: %v", n)
	}
	// Quarantine and archive are not restored.
	if len(areaNames(t, dir, sink.AreaQuarantine)) != 1 || len(areaNames(t, dir, sink.AreaArchive)) != 1 {
		t.Errorf("quarantine or archive changed")
	}
	if r := cli(t, 0, "restore", dir, "--quiet"); r.stdout != "" || r.stderr != "" {
		t.Errorf("second restore: %s", r)
	}
}

func TestRestoreDryRun(t *testing.T) {
	dir := makeSample(t)
	before := cli(t, 0, "ls", dir, "--json").stdout
	r := cli(t, 0, "restore", dir, "--dry-run", "--to", "http://127.0.0.1:1/never")
	golden(t, "restore_dry_run.txt", strings.ReplaceAll(r.stdout, dir, "DIR"))
	r = cli(t, 0, "restore", dir, "--dry-run", "--version", "1.0", "--where", "source=orders")
	golden(t, "restore_dry_run_filtered.txt", strings.ReplaceAll(r.stdout, dir, "DIR"))
	if after := cli(t, 0, "ls", dir, "--json").stdout; after != before {
		t.Errorf("a dry run changed the dump:\n%s\nwas\n%s", after, before)
	}
}

func TestRestoreHTTPRetries(t *testing.T) {
	dir := makeSample(t)
	// Every payload is refused with 503, then 429, then accepted.
	tg := newTarget(t, func(_ string, attempt int) int {
		switch attempt {
		case 0:
			return http.StatusServiceUnavailable
		case 1:
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	r := cli(t, 0, "restore", dir, "--to", tg.URL+"/in", "--retry-base", "1ms", "--retry-max", "10ms", "--content-type", "application/json")
	for _, p := range samplePayloads() {
		if tg.deliveredNow()[p] != 1 || tg.attemptsNow()[p] != 3 {
			t.Errorf("payload %q: delivered %d times in %d attempts, want once in 3", p, tg.deliveredNow()[p], tg.attemptsNow()[p])
		}
	}
	if len(tg.deliveredNow()) != sampleReady {
		t.Errorf("%d payloads delivered, want %d", len(tg.deliveredNow()), sampleReady)
	}
	if !strings.Contains(r.stderr, "restored 20 records") || !strings.Contains(r.stderr, "40 retries") {
		t.Errorf("report: %s", r)
	}
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 0 {
		t.Errorf("ready segments left: %v", n)
	}
	if n := areaNames(t, dir, sink.AreaQuarantine); len(n) != 1 {
		t.Errorf("quarantine: %v", n)
	}
	h := tg.headersOf(string(segB.records[1].payload))
	for k, want := range map[string]string{
		"X-Dlq-Reason":  "failed",
		"X-Dlq-Error":   "upstream: 503 Service Unavailable",
		"X-Dlq-Note":    "=?utf-8?q?=C3=BCn=C3=AFcode_=E2=9C=93?=",
		"X-Dlq-Replays": "1",
		"Content-Type":  "application/json",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}

func TestRestoreRefused(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, func(string, int) int { return http.StatusUnprocessableEntity })
	r := cli(t, exitUndelivered, "restore", dir, "--to", tg.URL, "--max-attempts", "2", "--retry-base", "1ms", "--retry-max", "2ms")
	if len(tg.deliveredNow()) != 0 {
		t.Errorf("delivered %v", tg.deliveredNow())
	}
	for _, p := range samplePayloads() {
		if tg.attemptsNow()[p] != 1 {
			t.Errorf("payload %q: %d attempts, want 1 (a refusal is not retried)", p, tg.attemptsNow()[p])
		}
	}
	if !strings.Contains(r.stderr, "quarantined 20 records") || !strings.Contains(r.stderr, "dlqdump quarantine ls") {
		t.Errorf("report: %s", r)
	}
	// Nothing is lost: the records are in quarantine, each with its reason.
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 0 {
		t.Errorf("ready segments left: %v", n)
	}
	r = cli(t, 0, "cat", dir, "--area", "quarantine", "--where", "reason=failed", "--where", "source=orders")
	if n := strings.Count(r.stdout, "\n"); n != 8 {
		t.Errorf("%d quarantined failed orders, want 8; %s", n, r)
	}
	if !strings.Contains(r.stdout, `"quarantine":"refused by the destination: POST `+tg.URL+`: 422 Unprocessable Entity: try again later (not retried)"`) {
		t.Errorf("quarantine reason: %s", r)
	}
	r = cli(t, 0, "quarantine", "ls", dir)
	if !strings.Contains(r.stdout, "12× refused by the destination: POST "+tg.URL) || !strings.Contains(r.stdout, segD.reason) {
		t.Errorf("quarantine ls: %s", r)
	}
	// Release everything and restore it into a target that takes it.
	cli(t, 0, "quarantine", "release", dir, "--all")
	if n := areaNames(t, dir, sink.AreaQuarantine); len(n) != 0 {
		t.Errorf("quarantine after release --all: %v", n)
	}
	ok := newTarget(t, nil)
	cli(t, 0, "restore", dir, "--to", ok.URL)
	if len(ok.deliveredNow()) != sampleReady+len(segD.records) {
		t.Errorf("delivered %d payloads after release, want %d", len(ok.deliveredNow()), sampleReady+len(segD.records))
	}
	for p, n := range ok.deliveredNow() {
		if n != 1 {
			t.Errorf("payload %q delivered %d times", p, n)
		}
	}
	// The headers of a released record say where it was.
	h := ok.headersOf(string(segA.records[0].payload))
	if !strings.HasPrefix(h.Get("X-Dlq-Origin"), segA.name()+"#0") || h.Get("X-Dlq-Replays") != "1" {
		t.Errorf("headers of a released record: %v", h)
	}
}

func TestRestoreNotRetried(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, func(string, int) int { return http.StatusBadRequest })
	cli(t, exitUndelivered, "restore", dir, segB.name(), "--to", tg.URL, "--max-attempts", "5", "--retry-base", "1ms")
	for _, r := range segB.records {
		if n := tg.attemptsNow()[string(r.payload)]; n != 1 {
			t.Errorf("a 400 answer was retried: %d attempts", n)
		}
	}
	// Only the named segment was touched.
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 2 {
		t.Errorf("ready: %v", n)
	}
}

func TestRestoreFiltersArchiveVersion(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, nil)
	r := cli(t, 0, "restore", dir, "--to", tg.URL, "--where", "reason=leak", "--archive")
	if len(tg.deliveredNow()) != 4+3 {
		t.Errorf("delivered %d, want the 7 leaks; %s", len(tg.deliveredNow()), r)
	}
	// The other records stay ready; the restored segments are archived.
	r = cli(t, 0, "cat", dir)
	if n := strings.Count(r.stdout, "\n"); n != sampleReady-7 || strings.Contains(r.stdout, `"reason":"leak"`) {
		t.Errorf("left ready: %s", r)
	}
	// C, all leaks, is archived; A keeps its other records, listed in its
	// progress, and stays ready; B, with no leak, is left as it was.
	if n := areaNames(t, dir, sink.AreaArchive); len(n) != 1+1 || !slices.Contains(n, segC.name()) {
		t.Errorf("archive: %v", n)
	}
	if n := areaNames(t, dir, sink.AreaReady); !slices.Contains(n, segA.name()) || !slices.Contains(n, segB.name()) {
		t.Errorf("ready: %v", n)
	}

	// --version: segments of other versions go to quarantine, exit 4.
	dir = makeSample(t)
	tg = newTarget(t, nil)
	r = cli(t, exitUndelivered, "restore", dir, "--to", tg.URL, "--version", "1.0")
	if len(tg.deliveredNow()) != 12+5 {
		t.Errorf("delivered %d, want 17; %s", len(tg.deliveredNow()), r)
	}
	q := cli(t, 0, "quarantine", "ls", dir, "--json").stdout
	if !strings.Contains(q, `"name":"`+segC.name()+`","size":`) || !strings.Contains(q, `"reason":"version 2.0.0.0, restorer expects 1.0.0.0"`) {
		t.Errorf("quarantine: %s", q)
	}

	// --limit and --rate.
	dir = makeSample(t)
	tg = newTarget(t, nil)
	start := time.Now()
	cli(t, 0, "restore", dir, "--to", tg.URL, "--limit", "5", "--rate", "20")
	if len(tg.deliveredNow()) != 5 {
		t.Errorf("--limit 5 delivered %d", len(tg.deliveredNow()))
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("--rate 20: 5 records in %s", d)
	}
	r = cli(t, 0, "cat", dir)
	if n := strings.Count(r.stdout, "\n"); n != sampleReady-5 {
		t.Errorf("%d records left after --limit 5, want %d", n, sampleReady-5)
	}
}

func TestRestoreUsage(t *testing.T) {
	dir := makeSample(t)
	for _, args := range [][]string{
		{"restore", dir, "--to", "ftp://x"},
		{"restore", dir, "--version", "x.y"},
		{"restore", dir, "--max-attempts", "0"},
		{"restore", dir, "--since", "yesterday"},
		{"restore", dir, "--where", "novalue"},
		{"restore", dir, "--since", "2026-03-02", "--until", "2026-03-01"},
	} {
		r := cli(t, exitUsage, args...)
		if !strings.Contains(r.stderr, "--help") {
			t.Errorf("no usage hint: %s", r)
		}
	}
	cli(t, exitError, "restore", dir, "20990101T000000.000000000Z-0000000000000000.dlq")
	cli(t, exitError, "restore", dir+"/missing")
}

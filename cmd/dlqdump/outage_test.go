package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// checkLeftReady checks that an outage left the sample as it was: its three
// ready segments, nothing quarantined but segD, and every ready record still
// to deliver.
func checkLeftReady(t *testing.T, dir string, r result) {
	t.Helper()
	if !strings.Contains(r.stderr, "dlqdump: destination unavailable: POST ") || !strings.Contains(r.stderr, "stay ready") || strings.Contains(r.stderr, "quarantined") {
		t.Errorf("the message does not say the records stay ready; %s", r)
	}
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 3 {
		t.Errorf("ready segments after the outage: %v", n)
	}
	if n := areaNames(t, dir, sink.AreaQuarantine); len(n) != 1 || n[0] != segD.name() {
		t.Errorf("quarantine after the outage: %v", n)
	}
	dry := cli(t, 0, "restore", dir, "--dry-run")
	if want := fmt.Sprintf("would deliver    %d records", sampleReady); !strings.Contains(dry.stdout, want) {
		t.Errorf("after the outage, want %q; %s", want, dry)
	}
}

// Issue 20, defect 4: a destination that is down quarantined every record
// (restore --to with the endpoint down and --max-attempts 1: the whole
// segment in quarantine, exit status 4, before the fix). A refused
// connection is an outage, not a poison record: the restore stops, leaves
// every record ready and exits with status 5.
func TestRestoreEndpointDown(t *testing.T) {
	dir := makeSample(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/in"
	ln.Close() // nothing listens there now: connections are refused
	r := cli(t, exitUnavailable, "restore", dir, "--to", url, "--max-attempts", "1")
	if !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("the cause is not named; %s", r)
	}
	checkLeftReady(t, dir, r)
}

// An endpoint answering 503 forever: each record it is offered is retried
// --max-attempts times, then the restore stops; once the endpoint is back,
// every record is delivered once.
func TestRestoreEndpoint503(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, func(string, int) int { return http.StatusServiceUnavailable })
	r := cli(t, exitUnavailable, "restore", dir, "--to", tg.URL, "--max-attempts", "3", "--retry-base", "1ms", "--retry-max", "2ms")
	if !strings.Contains(r.stderr, "503 Service Unavailable: try again later (3 attempts)") {
		t.Errorf("the cause is not named; %s", r)
	}
	// At most the records in flight were tried, not the dump.
	if n := len(tg.attemptsNow()); n == 0 || n > 4 {
		t.Errorf("%d records offered, want 1 to --concurrency (4)", n)
	}
	checkLeftReady(t, dir, r)

	ok := newTarget(t, nil)
	cli(t, 0, "restore", dir, "--to", ok.URL)
	if got := ok.deliveredNow(); len(got) != sampleReady {
		t.Errorf("%d records delivered after the outage, want %d", len(got), sampleReady)
	}
	for p, n := range ok.deliveredNow() {
		if n != 1 {
			t.Errorf("%q delivered %d times", p, n)
		}
	}
}

// An endpoint that never answers: each request ends at --timeout, which is
// an outage too.
func TestRestoreEndpointTimeout(t *testing.T) {
	dir := makeSample(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done(): // the client gave up
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	r := cli(t, exitUnavailable, "restore", dir, "--to", srv.URL, "--max-attempts", "1", "--timeout", "50ms")
	if !strings.Contains(r.stderr, "context deadline exceeded") {
		t.Errorf("the cause is not named; %s", r)
	}
	checkLeftReady(t, dir, r)
}

// An outage in the middle of a restore with several POSTs in flight: what
// was delivered before it is done, the rest stays ready, and the next
// restore delivers it; only records that were in flight when the endpoint
// went down (at most --concurrency) may arrive twice.
func TestRestoreOutageMidway(t *testing.T) {
	dir := makeSample(t)
	// Guarded by tg.mu: refuse is called with it held.
	up, requests := false, 0
	tg := newTarget(t, func(string, int) int {
		requests++
		if !up && requests > 7 {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	cli(t, exitUnavailable, "restore", dir, "--to", tg.URL, "--max-attempts", "1", "--concurrency", "4")
	first := len(tg.deliveredNow())
	if first == 0 || first > 7 {
		t.Fatalf("%d records delivered before the outage, want 1 to 7", first)
	}
	tg.mu.Lock()
	up = true
	tg.mu.Unlock()
	cli(t, 0, "restore", dir, "--to", tg.URL, "--concurrency", "4")
	twice := 0
	for p, n := range tg.deliveredNow() {
		if n > 1 {
			twice += n - 1
			t.Logf("%q delivered %d times", p, n)
		}
	}
	if got := len(tg.deliveredNow()); got != sampleReady || twice > 4 {
		t.Errorf("%d records delivered, %d of them again; want %d, at most 4 again", got, twice, sampleReady)
	}
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 0 {
		t.Errorf("ready segments left: %v", n)
	}
}

// Issue 20, defect 4: --limit bounded deliveries only, so an endpoint
// refusing everything was offered every record and all of them were
// quarantined. It bounds what is offered, refused or not.
func TestRestoreLimitBoundsAttempts(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, func(string, int) int { return http.StatusUnprocessableEntity })
	r := cli(t, exitUndelivered, "restore", dir, "--to", tg.URL, "--limit", "3")
	if n := tg.requestsNow(); n != 3 {
		t.Errorf("%d requests with --limit 3; %s", n, r)
	}
	if !strings.Contains(r.stderr, "quarantined 3 records") {
		t.Errorf("report; %s", r)
	}
	dry := cli(t, 0, "restore", dir, "--dry-run")
	if want := fmt.Sprintf("would deliver    %d records", sampleReady-3); !strings.Contains(dry.stdout, want) {
		t.Errorf("after --limit 3, want %q; %s", want, dry)
	}
}

// BenchmarkRestoreSlowEndpoint restores 400 records into an endpoint that
// takes 2ms to answer, one POST at a time and several at once.
func BenchmarkRestoreSlowEndpoint(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(2 * time.Millisecond) // the endpoint's latency
	}))
	defer srv.Close()
	const n = 400
	for _, conc := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte, BlockSize: 4 * dlqdump.Kilobyte})
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if err := q.Enqueue(fmt.Sprintf(`{"order":%d}`, i)); err != nil {
						b.Fatal(err)
					}
				}
				if err := q.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if code := run([]string{"restore", dir, "--to", srv.URL, "--concurrency", fmt.Sprint(conc), "-q"}, io.Discard, io.Discard); code != 0 {
					b.Fatalf("exit status %d", code)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// The README's console block of a restore into an endpoint that is down is
// what the command prints, the directory, the port and the segment's name
// aside.
func TestReadmeOutageOutput(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "$ dlqdump restore dlq --to http://127.0.0.1:9/in --max-attempts 1"
	_, after, ok := strings.Cut(string(b), "```console\n"+cmd)
	if !ok {
		t.Fatalf("README.md has no console block starting with %q", cmd)
	}
	block, _, _ := strings.Cut(after, "```")
	lines := strings.Split(block, "\n")[1:] // the rest of the command line is a comment
	want := strings.Join(lines[:slices.Index(lines, "$ echo $?")], "\n")

	dir := makeSample(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// The segments in flight deliver side by side: whichever met the
	// outage first names where the restore stopped.
	repl := []string{dir, "dlq", addr, "127.0.0.1:9"}
	for _, name := range areaNames(t, dir, sink.AreaReady) {
		repl = append(repl, name, "20261122T043204.274583543Z-c2b8f6ffa27c4ee6.dlq")
	}
	r := cli(t, exitUnavailable, "restore", dir, "--to", "http://"+addr+"/in", "--max-attempts", "1")
	got := strings.NewReplacer(repl...).Replace(r.stderr)
	if strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Errorf("README:\n%s\nthe command:\n%s", want, got)
	}
}

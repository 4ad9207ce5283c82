package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
)

// A destination that trips (an outage of two requests, with two attempts
// per record) fails the pass it tripped in, not the runner's later passes:
// the next job delivers once the endpoint is back.
func TestJobRunDestinationRecoversAfterATrip(t *testing.T) {
	dir := makeSample(t)
	var outage atomic.Int32
	outage.Store(2)
	tg := newTarget(t, func(string, int) int {
		if outage.Add(-1) >= 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cli(t, 0, "job", "create", dir, "--id", "first")
	stop := startRunner(t, dir, tg.URL, "--max-attempts", "2", "--retry-base", "10ms", "--retry-max", "20ms", "--jobs", "1", "--concurrency", "1")
	defer stop()
	cli(t, -1, "job", "wait", dir, "first", "--timeout", "60s")
	cli(t, 0, "job", "create", dir, "--id", "second")
	r := cli(t, 0, "job", "wait", dir, "second", "--timeout", "60s")
	if len(tg.deliveredNow()) == 0 {
		t.Fatalf("nothing delivered after an outage of two requests; second job: %s %s", r.stdout, r.stderr)
	}
}

// SIGTERM while a POST hangs: the runner lets the POST in flight end and
// makes no further attempt before it releases the job.
func TestJobRunStopMakesNoFurtherAttempt(t *testing.T) {
	dir := makeSample(t)
	var requests atomic.Int32
	release := make(chan struct{})
	got := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then a client that goes cancels r's context
		requests.Add(1)
		got <- struct{}{}
		select { // hangs until the client gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	cli(t, 0, "job", "create", dir, "--id", "hang")
	cmd := exec.Command(binary, "job", "run", dir, "--to", srv.URL, "--lease", "1s", "--timeout", "2s",
		"--max-attempts", "4", "--retry-base", "10ms", "--retry-max", "20ms", "--jobs", "1", "--concurrency", "1")
	cmd.Env = baseEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-got
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if n := requests.Load(); n != 1 {
		t.Errorf("the endpoint got %d requests, want 1: attempts went on after SIGTERM", n)
	}
	r := cli(t, 0, "job", "show", dir, "hang")
	if r.stdout == "" {
		t.Errorf("job show printed nothing")
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// jobJSON is the contract of a job's JSON object.
type jobJSON struct {
	ID          string    `json:"id"`
	State       string    `json:"state"`
	At          time.Time `json:"at"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Delivered   uint64    `json:"delivered"`
	Quarantined uint64    `json:"quarantined"`
	Error       string    `json:"error"`
}

func parseJob(t *testing.T, line string) jobJSON {
	t.Helper()
	var j jobJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &j); err != nil {
		t.Fatalf("job JSON %q: %v", line, err)
	}
	return j
}

// startRunner starts `dlqdump job run` and returns a function that stops it
// with SIGINT, checks that it ended well and returns what it printed on
// stderr.
func startRunner(t *testing.T, dir, to string, extra ...string) func() string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"job", "run", dir, "--to", to, "--lease", "1s"}, extra...)...)
	cmd.Env = baseEnv()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
		}
		close(done)
	}()
	return func() string {
		_ = cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		<-done
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == exitInterrupted) {
			t.Errorf("job run ended with %v, want exit status %d (interrupted):\n%s", err, exitInterrupted, out.String())
		}
		return out.String()
	}
}

// The CLI contract: create (idempotent by ID, --json), ls, show, run into an
// HTTP destination, wait; a bad spec is refused naming the field; cancelling
// a finished job is a clear error.
func TestJobCLI(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, nil)
	at := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second).Format(time.RFC3339)
	j := parseJob(t, cli(t, 0, "job", "create", dir, "--id", "leaks", "--where", "reason=leak", "--at", at, "--json").stdout)
	if j.ID != "leaks" || j.State != "pending" || j.At.Format(time.RFC3339) != at {
		t.Fatalf("created %+v", j)
	}
	if r := cli(t, 0, "job", "create", dir, "--id", "leaks", "--where", "reason=leak", "--at", at); strings.TrimSpace(r.stdout) != "leaks" {
		t.Fatalf("the same create again: %s", r)
	}
	if r := cli(t, exitError, "job", "create", dir, "--id", "leaks"); !strings.Contains(r.stderr, "another spec") {
		t.Fatalf("another spec under the ID: %s", r)
	}
	for _, bad := range [][]string{{"--rate", "-1"}, {"--area", "archive"}, {"--at", "tomorrow"}} {
		r := cli(t, exitUsage, append([]string{"job", "create", dir}, bad...)...)
		if !strings.Contains(strings.ToLower(r.stderr), strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("%v: %s", bad, r)
		}
	}
	ls := cli(t, 0, "job", "ls", dir, "--json", "--state", "pending")
	if n := strings.Count(ls.stdout, "\n"); n != 1 {
		t.Fatalf("ls --state pending: %s", ls)
	}
	if r := cli(t, 0, "job", "show", dir, "leaks"); !strings.Contains(r.stdout, "pending") {
		t.Fatalf("show: %s", r)
	}

	stop := startRunner(t, dir, tg.URL)
	r := cli(t, 0, "job", "wait", dir, "leaks", "--timeout", "1m")
	stop()
	j = parseJob(t, cli(t, 0, "job", "show", dir, "leaks", "--json").stdout)
	if j.State != "completed" || j.Delivered != 7 || j.Started.Format(time.RFC3339) < at || j.Finished.IsZero() {
		t.Fatalf("after the run: %+v; %s", j, r)
	}
	if len(tg.deliveredNow()) != 7 {
		t.Fatalf("the destination got %d records, want the 7 leaks", len(tg.deliveredNow()))
	}
	if r := cli(t, exitError, "job", "cancel", dir, "leaks"); !strings.Contains(r.stderr, "ended") {
		t.Fatalf("cancel a completed job: %s", r)
	}
	// Created again: it says that it ended, and how.
	if r := cli(t, exitError, "job", "create", dir, "--id", "leaks", "--where", "reason=leak", "--at", at); !strings.Contains(r.stderr, "leaks completed") || !strings.Contains(r.stderr, "7 delivered") {
		t.Fatalf("create the completed job again: %s", r)
	}
	if _, err := os.Stat(dir + "/.tables/jobs"); err != nil {
		t.Fatalf("the jobs are not in the dump's directory: %v", err)
	}
}

// A job cancelled before its second never runs; a second cancel is
// harmless; a paused job resumes.
func TestJobCLIControl(t *testing.T) {
	dir := makeSample(t)
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cli(t, 0, "job", "create", dir, "--id", "a", "--at", later)
	cli(t, 0, "job", "create", dir, "--id", "b", "--at", later)
	for range 2 {
		if r := cli(t, 0, "job", "cancel", dir, "a"); !strings.Contains(r.stdout, "a: cancelled") {
			t.Fatalf("cancel: %s", r)
		}
	}
	if r := cli(t, 0, "job", "pause", dir, "b"); !strings.Contains(r.stdout, "b: paused") {
		t.Fatalf("pause: %s", r)
	}
	if r := cli(t, 0, "job", "resume", dir, "b"); !strings.Contains(r.stdout, "b: pending") {
		t.Fatalf("resume: %s", r)
	}
	if r := cli(t, exitError, "job", "wait", dir, "b", "--timeout", "100ms"); !strings.Contains(r.stderr, "pending") {
		t.Fatalf("wait timed out: %s", r)
	}
}

// jobState reads a job's state and delivered count through the CLI.
func jobState(t *testing.T, dir, id string) jobJSON {
	t.Helper()
	return parseJob(t, cli(t, 0, "job", "show", dir, id, "--json").stdout)
}

// waitJobState waits until the job is in state.
func waitJobState(t *testing.T, dir, id, state string) jobJSON {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		j := jobState(t, dir, id)
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s a minute later, want %s", id, j.State, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pause, resume and cancel from a second process while a job runs at 200
// items/s: after each command returns, at most one block is delivered
// before the job stops; cancelled, what it did not deliver stays ready.
func TestJobControlWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s := numbered("c", 0x31, sink.AreaReady, 3000, 512, nil)
	path := writeSegment(t, dir, s)
	maxBlock := 0
	for _, b := range footer(t, path).Blocks {
		maxBlock = max(maxBlock, int(b.Count))
	}
	tg := newTarget(t, nil)
	cli(t, 0, "job", "create", dir, "--id", "slow", "--rate", "200")
	stop := startRunner(t, dir, tg.URL, "--concurrency", "1")
	defer stop()
	delivered := func() int { return len(tg.deliveredNow()) }
	waitCount := func(n int) {
		deadline := time.Now().Add(time.Minute)
		for delivered() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d delivered a minute later, want %d", delivered(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCount(100)
	cli(t, 0, "job", "pause", dir, "slow")
	n0 := delivered()
	j := waitJobState(t, dir, "slow", "paused")
	if n1 := delivered(); n1-n0 > maxBlock || j.Delivered != uint64(n1) {
		t.Fatalf("paused: %d delivered after the pause returned (a block holds %d); the job says %d, the endpoint got %d", n1-n0, maxBlock, j.Delivered, n1)
	}
	paused := delivered()
	cli(t, 0, "job", "resume", dir, "slow")
	waitCount(paused + 100)
	cli(t, 0, "job", "cancel", dir, "slow")
	n0 = delivered()
	j = waitJobState(t, dir, "slow", "cancelled")
	n1 := delivered()
	if n1-n0 > maxBlock || j.Delivered != uint64(n1) {
		t.Fatalf("cancelled: %d delivered after the cancel returned (a block holds %d); the job says %d, the endpoint got %d", n1-n0, maxBlock, j.Delivered, n1)
	}
	// What the job did not deliver is still there, once: a dry run of a
	// restore would deliver exactly the rest.
	r := cli(t, 0, "restore", dir, "--dry-run")
	if !strings.Contains(r.stdout, fmt.Sprintf("would deliver    %d records", 3000-n1)) {
		t.Fatalf("after the cancel (%d delivered): %s", n1, r)
	}
}

// `dlqdump job run` says when a job starts and ends, with its counts.
func TestJobRunLogs(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, nil)
	cli(t, 0, "job", "create", dir, "--id", "logged", "--where", "reason=leak")
	stop := startRunner(t, dir, tg.URL)
	cli(t, 0, "job", "wait", dir, "logged", "--timeout", "1m")
	out := stop()
	for _, want := range []string{"job started", "job=logged", "job completed", "delivered=7"} {
		if !strings.Contains(out, want) {
			t.Fatalf("job run printed no %q:\n%s", want, out)
		}
	}
}

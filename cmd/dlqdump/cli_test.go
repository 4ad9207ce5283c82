package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

func TestHelp(t *testing.T) {
	r := cli(t, 0, "--help")
	for _, want := range []string{"Exit status:", "0    success", "2    usage", "3    damage found", "4    restore: some records were not delivered",
		"s3://BUCKET/PREFIX", "AWS_ENDPOINT_URL", "ls", "stat", "cat", "verify", "restore", "cp", "mv", "quarantine"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dlqdump --help lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, c := range [][]string{{"ls"}, {"stat"}, {"cat"}, {"verify"}, {"restore"}, {"cp"}, {"mv"}, {"quarantine"}, {"quarantine", "ls"}, {"quarantine", "release"}} {
		r := cli(t, 0, append(c, "--help")...)
		if !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, "--quiet") {
			t.Errorf("dlqdump %s --help:\n%s", strings.Join(c, " "), r.stdout)
		}
	}
	if r := cli(t, 0, "--version"); !strings.Contains(r.stdout, "dlqdump version") {
		t.Errorf("--version: %s", r)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := makeSample(t)
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"ls"},
		{"ls", dir, "--bogus"},
		{"ls", dir, "--area", "attic"},
		{"cat", dir, "--format", "xml"},
		{"cat", dir, "--limit", "-1"},
		{"quarantine"},
		{"quarantine", "release", dir},
		{"quarantine", "release", dir, "x.dlq", "--all"},
		{"ls", "ftp://host/x"},
	} {
		r := cli(t, -1, args...)
		if r.code != exitUsage {
			t.Errorf("want exit status 2; %s", r)
		}
	}
	r := cli(t, exitError, "ls", dir+"/missing")
	if !strings.Contains(r.stderr, "no such file or directory") {
		t.Errorf("missing location: %s", r)
	}
}

func TestQuarantine(t *testing.T) {
	dir := makeSample(t)
	golden(t, "quarantine_ls.txt", cli(t, 0, "quarantine", "ls", dir).stdout)
	golden(t, "quarantine_ls.jsonl", cli(t, 0, "quarantine", "ls", dir, "--json").stdout)
	r := cli(t, 0, "quarantine", "release", dir, segD.name())
	if r.stdout != "released "+segD.name()+"\n" {
		t.Errorf("release: %s", r)
	}
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 4 {
		t.Errorf("ready after release: %v", n)
	}
	if r := cli(t, 0, "quarantine", "ls", dir); r.stdout != "" || !strings.Contains(r.stderr, "no quarantined segments") {
		t.Errorf("quarantine ls of an empty quarantine: %s", r)
	}
	if _, err := os.Stat(segPath(dir, sink.AreaQuarantine, segD.name()) + ".reason"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the reason file stays: %v", err)
	}
	cli(t, exitError, "quarantine", "release", dir, segD.name())
}

// TestInterrupt interrupts a restore into a slow endpoint: the first SIGINT
// stops it at the end of a block, keeping the rest ready; a second restore
// delivers the rest; nothing is lost or delivered twice.
func TestInterrupt(t *testing.T) {
	dir := makeSample(t)
	var seen atomic.Int64
	tg := newTarget(t, func(string, int) int {
		seen.Add(1)
		time.Sleep(50 * time.Millisecond)
		return http.StatusOK
	})
	// One POST at a time: with several in flight, those after the record
	// it stops at may be delivered again (TestRestoreOutageMidway).
	cmd := exec.Command(binary, "restore", dir, "--to", tg.URL, "--concurrency", "1")
	cmd.Env = baseEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for seen.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
	}
	first := len(tg.deliveredNow())
	if first == 0 || first >= sampleReady {
		t.Fatalf("delivered %d records before stopping; stderr:\n%s", first, stderr.String())
	}
	cli(t, 0, "restore", dir, "--to", tg.URL)
	if len(tg.deliveredNow()) != sampleReady {
		t.Errorf("delivered %d distinct records in all, want %d", len(tg.deliveredNow()), sampleReady)
	}
	for p, n := range tg.deliveredNow() {
		if n != 1 {
			t.Errorf("%q delivered %d times", p, n)
		}
	}
}

package main

import (
	"net/http"
	"strings"
	"testing"
)

// This build has no broker: --to nats:// and kafka:// are usage errors that
// say how to build the command that has them.
func TestToBrokerNeedsTheBrokersBuild(t *testing.T) {
	dir := makeSample(t)
	for _, args := range [][]string{
		{"restore", dir, "--to", "nats://127.0.0.1:4222/orders"},
		{"job", "run", dir, "--to", "kafka://127.0.0.1:9092/orders"},
		{"job", "run", dir, "--to", "http://127.0.0.1:1/in", "--dest", "audit=nats://127.0.0.1:4222/audit"},
	} {
		r := cli(t, exitUsage, args...)
		if !strings.Contains(r.stderr, "want an http:// or https:// URL") || !strings.Contains(r.stderr, "go run ./cmd/build-dlqdump") {
			t.Errorf("%v: %s", args, r)
		}
	}
	r := cli(t, exitUsage, "job", "run", dir, "--to", "http://127.0.0.1:1/in", "--dest", "=http://x/")
	if !strings.Contains(r.stderr, "want NAME or NAME=URL") {
		t.Errorf("--dest =URL: %s", r)
	}
}

// job run --dest NAME=URL delivers the jobs of destination NAME into URL,
// the others into --to.
func TestJobRunNamedDestinationURL(t *testing.T) {
	dir := makeSample(t)
	main := newTarget(t, func(string, int) int { return http.StatusOK })
	audit := newTarget(t, func(string, int) int { return http.StatusOK })
	cli(t, 0, "job", "create", dir, "--id", "audit", "--dest", "audit", "--where", "source=billing")
	stop := startRunner(t, dir, main.URL, "--dest", "audit="+audit.URL, "--jobs", "1")
	defer stop()
	cli(t, -1, "job", "wait", dir, "audit", "--timeout", "60s")
	cli(t, 0, "job", "create", dir, "--id", "rest")
	cli(t, -1, "job", "wait", dir, "rest", "--timeout", "60s")
	got, rest := audit.deliveredNow(), main.deliveredNow()
	if len(got) != 1 || got[`{"invoice":"INV-42","amount_cents":1999}`] != 1 {
		t.Fatalf("the audit endpoint got %v, want the billing record", got)
	}
	if len(rest) == 0 || rest[`{"invoice":"INV-42","amount_cents":1999}`] != 0 {
		t.Fatalf("--to got %v: want the other records", rest)
	}
}

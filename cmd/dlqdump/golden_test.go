package main

import (
	"strings"
	"testing"
)

func TestLs(t *testing.T) {
	dir := makeSample(t)
	golden(t, "ls.txt", cli(t, 0, "ls", dir).stdout)
	golden(t, "ls.jsonl", cli(t, 0, "ls", dir, "--json").stdout)
	golden(t, "ls_quarantine.txt", cli(t, 0, "ls", dir, "--area", "quarantine").stdout)
	// Named segments are looked for in every area.
	r := cli(t, 0, "ls", dir, segD.name(), segA.name())
	if !strings.Contains(r.stdout, segD.name()) || !strings.Contains(r.stdout, segA.name()) || strings.Contains(r.stdout, segB.name()) {
		t.Errorf("ls with names: %s", r)
	}
	r = cli(t, 1, "ls", dir, "20990101T000000.000000000Z-0000000000000000.dlq")
	if !strings.Contains(r.stderr, "not found") {
		t.Errorf("ls of a missing segment: %s", r)
	}
}

func TestStat(t *testing.T) {
	dir := makeSample(t)
	golden(t, "stat.txt", cli(t, 0, "stat", dir).stdout)
	golden(t, "stat_by.json", cli(t, 0, "stat", dir, "--by", "reason", "--by", "source", "--json").stdout)
	golden(t, "stat_ready.txt", cli(t, 0, "stat", dir, "--area", "ready", "--by", "source").stdout)
}

func TestCat(t *testing.T) {
	dir := makeSample(t)
	golden(t, "cat.jsonl", cli(t, 0, "cat", dir).stdout)
	golden(t, "cat_all.jsonl", cli(t, 0, "cat", dir, "--area", "all").stdout)
	golden(t, "cat_filtered.jsonl", cli(t, 0, "cat", dir,
		"--since", "2026-03-01T12:01:00Z", "--until", "2026-03-01T13:00:06Z", "--where", "reason=failed", "--where", "source=orders").stdout)
	golden(t, "cat_hex.txt", cli(t, 0, "cat", dir, segB.name(), "--format", "hex").stdout)
	golden(t, "cat_raw.txt", cli(t, 0, "cat", dir, segB.name(), segC.name(), "--format", "raw").stdout)

	r := cli(t, 0, "cat", dir, "--limit", "3")
	if n := strings.Count(r.stdout, "\n"); n != 3 {
		t.Errorf("--limit 3 printed %d lines: %s", n, r)
	}
	// Durations count back from now; the sample is in the past.
	if r := cli(t, 0, "cat", dir, "--since", "100000h"); strings.Count(r.stdout, "\n") != sampleReady {
		t.Errorf("--since 100000h: %s", r)
	}
	if r := cli(t, 0, "cat", dir, "--since", "1h"); r.stdout != "" {
		t.Errorf("--since 1h: %s", r)
	}
	if r := cli(t, 0, "cat", dir, "--until", "30d", "--where", "source=billing"); strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("--until 30d --where source=billing: %s", r)
	}
	// A date is midnight UTC.
	if r := cli(t, 0, "cat", dir, "--since", "2026-03-02"); strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("--since 2026-03-02: %s", r)
	}
}

func TestCatProto(t *testing.T) {
	dir, desc := protoSample(t)
	golden(t, "cat_proto.jsonl", cli(t, 0, "cat", dir, "--proto-descriptor", desc, "--proto-message", "google.protobuf.Method").stdout)
	// A short name unique in the set is enough.
	golden(t, "cat_proto_raw.txt", cli(t, 0, "cat", dir, "--proto-descriptor", desc, "--proto-message", "Method", "--format", "raw", "--limit", "2").stdout)
	r := cli(t, 1, "cat", dir, "--proto-descriptor", desc, "--proto-message", "shop.Nope")
	if !strings.Contains(r.stderr, "no such message") {
		t.Errorf("unknown message: %s", r)
	}
	r = cli(t, 2, "cat", dir, "--proto-message", "Method")
	if !strings.Contains(r.stderr, "go together") {
		t.Errorf("--proto-message alone: %s", r)
	}
}

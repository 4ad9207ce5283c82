package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// checkOnePrefix fails for a line of stderr naming the program more than
// once, outside the quoted values of a warning's attributes (key="...").
func checkOnePrefix(t *testing.T, r result) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if n := strings.Count(outsideQuotes(line), "dlqdump:"); n > 1 {
			t.Errorf("%q says dlqdump: %d times; %s", line, n, r)
		}
	}
}

// outsideQuotes returns line without its quoted attribute values.
func outsideQuotes(line string) string {
	var b strings.Builder
	for {
		i := strings.Index(line, `="`)
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i+1])
		q, err := strconv.QuotedPrefix(line[i+1:])
		if err != nil {
			b.WriteString(line[i+1:])
			return b.String()
		}
		line = line[i+1+len(q):]
	}
}

// Issue 20: reading an encrypted segment with an identity that does not
// match printed "dlqdump: dlqdump: segment X: dlqdump: no key for encrypted
// segment: ... (give --identity FILE, ...)": three prefixes, and advice to
// give the flag that was given. One prefix now, and the advice depends on
// whether identities were given.
func TestMessagesNoKey(t *testing.T) {
	a, other := genIdentity(t), genIdentity(t)
	dir, _ := encryptedDump(t, 10, a.Recipient())

	r := cli(t, exitError, "cat", dir, "--identity", keyFile(t, other))
	checkOnePrefix(t, r)
	if !strings.Contains(r.stderr, "dlqdump: no key for encrypted segment: segment ") || !strings.Contains(r.stderr, "none of the identities given matches") {
		t.Errorf("cat with another identity; %s", r)
	}
	if strings.Contains(r.stderr, "give --identity FILE") || !strings.Contains(r.stderr, "give one its key is wrapped for") {
		t.Errorf("the advice ignores the --identity given; %s", r)
	}

	r = cli(t, exitError, "cat", dir)
	checkOnePrefix(t, r)
	if !strings.Contains(r.stderr, "no identity was given") || !strings.Contains(r.stderr, "give --identity FILE") {
		t.Errorf("cat without identity; %s", r)
	}

	r = cli(t, exitError, "restore", dir, "--identity", keyFile(t, other))
	checkOnePrefix(t, r)
	if !strings.Contains(r.stderr, "none of the identities given unwraps its key") || strings.Contains(r.stderr, "give --identity FILE") {
		t.Errorf("restore with another identity; %s", r)
	}
}

// Issue 20: stat of an encrypted dump without its key printed a whole table
// ("records 0", "(no records)") before the error. It prints the error only.
func TestStatWithoutKey(t *testing.T) {
	a := genIdentity(t)
	dir, _ := encryptedDump(t, 10, a.Recipient())
	r := cli(t, exitError, "stat", dir)
	if r.stdout != "" || !strings.Contains(r.stderr, "give --identity FILE") {
		t.Errorf("stat without the key; %s", r)
	}
	checkOnePrefix(t, r)
	if r := cli(t, 0, "stat", dir, "--identity", keyFile(t, a)); !regexp.MustCompile(`records +10\n`).MatchString(r.stdout) {
		t.Errorf("stat with the key; %s", r)
	}
}

// Issue 20: a quarantined side segment released to ready was listed as
// "released by  (written ...)": its record has no owner.
func TestLsSideSegmentRecord(t *testing.T) {
	dir := makeSample(t)
	tg := newTarget(t, func(string, int) int { return 422 })
	cli(t, exitUndelivered, "restore", dir, segC.name(), "--to", tg.URL)
	cli(t, 0, "quarantine", "release", dir, "--all")
	r := cli(t, 0, "ls", dir)
	if strings.Contains(r.stdout, "by  (") || strings.Contains(r.stdout, "by (") {
		t.Errorf("a record without an owner is said to be by nobody; %s", r)
	}
	if !strings.Contains(r.stdout, "records set aside from "+segC.name()) {
		t.Errorf("the side segment's note does not name its source; %s", r)
	}
}

// Issue 20: ls said 1 damaged block where stat said 2 on the same segment
// (stat counted its missing footer as a block). Both count blocks now, and
// stat names the footer apart.
func TestDamageCountsAgree(t *testing.T) {
	dir := makeSample(t)
	pathC := segPath(dir, sink.AreaReady, segC.name())
	ftC := footer(t, pathC)
	if err := os.Truncate(pathC, ftC.Blocks[len(ftC.Blocks)-1].End()+7); err != nil {
		t.Fatal(err)
	}
	r := cli(t, exitDamage, "ls", dir, segC.name())
	if !strings.Contains(r.stdout, "unsealed, 1 damaged block") {
		t.Errorf("ls; %s", r)
	}
	r = cli(t, exitDamage, "stat", dir)
	if !regexp.MustCompile(`damaged +1 block, 1 header or footer \(see stderr\)`).MatchString(r.stdout) {
		t.Errorf("stat; %s", r)
	}
}

// Issue 20: prune said "removed 1 segments", "--area \"\"" for a missing
// --area, and refused --max-age 30d while --since 7d was accepted.
func TestPruneMessages(t *testing.T) {
	dir := makeSample(t)
	r := cli(t, exitUsage, "prune", dir, "--max-age", "30d")
	if !strings.Contains(r.stderr, "--area is required") || strings.Contains(r.stderr, `--area ""`) {
		t.Errorf("prune without --area; %s", r)
	}
	r = cli(t, 0, "prune", dir, "--area", "archive", "--max-age", "30d", "--dry-run")
	if !strings.Contains(r.stdout, "would remove 1 segment, 2 records, ") {
		t.Errorf("prune --max-age 30d; %s", r)
	}
	for _, args := range [][]string{
		{"prune", dir, "--area", "archive", "--max-age", "1w", "--dry-run"},
		{"restore", dir, "--dry-run", "--timeout", "1d", "--retry-max", "1d"},
	} {
		cli(t, 0, args...)
	}
	if r := cli(t, exitUsage, "prune", dir, "--area", "archive", "--max-age", "soon"); !strings.Contains(r.stderr, "want a duration such as 90s, 12h, 30d or 1w") {
		t.Errorf("a bad duration; %s", r)
	}
}

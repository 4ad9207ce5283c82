package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// fullTest is a test that runs a deterministic sample, or smaller sizes, in
// CI (scripts/test.sh) and its full version with DLQDUMP_FULL=1.
type fullTest struct {
	pkg, name string
	// env is set besides DLQDUMP_FULL=1, for a test with a variable of
	// its own.
	env []string
	// ci and full say what CI runs and what the full version does.
	ci, full string
}

// fullTestList are the tests the "full tests" section runs with
// DLQDUMP_FULL=1. The fault enumerations TestFaultsDump, TestFaultsRestore
// and TestFaultsStalls are not here: their full versions are the sections
// "dump fault enumeration", "restore fault enumeration" and "stall
// enumeration", on versitygw too.
var fullTestList = []fullTest{
	{".", "TestRestoreLargeSegmentHeapBounded", nil, "a 256 MiB segment", "a 1 GiB segment"},
	{".", "TestRecordIDsUnique", nil, "250,000 records", "1,000,000 records"},
	{".", "TestRestorersShareAStore", nil, "400 segments on a directory, 150 on versitygw", "1,000 and 300 (the section \"many restorers\" runs 10,000)"},
	{"./cmd/dlqdump", "TestFaultPoints", []string{"DLQDUMP_FAULT_FULL=1"}, "a deterministic sample of each command's fault points", "every fault point of every command"},
	{"./segment", "TestTruncationSweep", nil, "every length where the structure is parsed (file header, block headers ±8 bytes, footer and trailer) and every 7th elsewhere", "every length"},
	{"./segment", "TestBitFlipSweep", nil, "500 sets of flipped bits a codec", "2,000 sets a codec"},
	{"./segment", "TestEncryptedSweeps", nil, "TestTruncationSweep's sample of the lengths and 250 sets of flipped bits a codec", "every length and 1,000 sets a codec"},
	{"./segment", "TestRoundTripMillion", nil, "250,000 records a codec", "1,000,000 records a codec"},
}

// fullTests runs each test of fullTestList in full, without the race
// detector (CI runs the samples with it), one go test per package, and
// reports each with its time. Skipped with -short: CI runs the samples.
func fullTests(o *options) []result {
	if o.short {
		return []result{{section: "full tests", figures: fmt.Sprintf("not run with -short: CI runs the samples of %s", fullTestNames()), bound: "not run", ok: true}}
	}
	var pkgs []string
	byPkg := map[string][]fullTest{}
	for _, t := range fullTestList {
		if byPkg[t.pkg] == nil {
			pkgs = append(pkgs, t.pkg)
		}
		byPkg[t.pkg] = append(byPkg[t.pkg], t)
	}
	var rs []result
	for _, pkg := range pkgs {
		ts := byPkg[pkg]
		var names []string
		env := []string{"DLQDUMP_FULL=1"}
		for _, t := range ts {
			names = append(names, t.name)
			env = append(env, t.env...)
		}
		cmd := exec.Command("go", "test", "-count=1", "-timeout=4h", "-v", "-run", "^("+strings.Join(names, "|")+")$", pkg)
		cmd.Env = append(os.Environ(), env...)
		fmt.Fprintf(os.Stderr, "   %s %s\n", strings.Join(env, " "), strings.Join(cmd.Args, " "))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		for _, t := range ts {
			rs = append(rs, fullTestResult(t, out, err, took))
		}
	}
	return rs
}

// fullTestResult reads t's verdict from go test -v's output.
func fullTestResult(t fullTest, out []byte, err error, took time.Duration) result {
	r := result{section: "full test " + t.name, bound: "pass", note: "CI runs " + t.ci}
	m := regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): ` + regexp.QuoteMeta(t.name) + ` \(([0-9.]+s)\)`).FindSubmatch(out)
	switch {
	case m == nil:
		tail := string(out)
		if len(tail) > 600 {
			tail = tail[len(tail)-600:]
		}
		r.figures = fmt.Sprintf("%s: no verdict after %s (%v): %s", t.full, took.Round(time.Second), err, strings.ReplaceAll(tail, "\n", " "))
	case string(m[1]) == "PASS":
		r.figures, r.ok = fmt.Sprintf("%s: passed in %s", t.full, m[2]), true
	default:
		r.figures = fmt.Sprintf("%s: %s in %s", t.full, strings.ToLower(string(m[1])), m[2])
	}
	return r
}

// fullTestNames lists the tests of fullTestList.
func fullTestNames() string {
	var names []string
	for _, t := range fullTestList {
		names = append(names, t.name)
	}
	return strings.Join(names, ", ")
}

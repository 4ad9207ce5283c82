// Command dlqdump-reliability runs dlqdump through crashes, corruption, a full
// disk, S3 faults, the dump and restore fault enumerations, several
// restorers sharing a store, restore jobs, and fuzzing, and prints what survived:
//
//	go run ./cmd/dlqdump-reliability [-rounds 30] [-fuzztime 10m] [-out docs/RELIABILITY.md]
//	go run ./cmd/dlqdump-reliability -short        # the CI version, a few minutes
//
// Every section counts what a user cares about: acknowledged records lost,
// duplicates against the documented bound, panics, records recovered. The
// command exits non-zero when a guarantee is broken. It must run from the
// repository (fuzzing runs `go test -fuzz` on its packages). The S3 sections
// use the server named by the DLQDUMP_S3_* variables (scripts/versitygw.sh
// prints them), or start versitygw themselves (installing it under CI), and
// are reported as not run, outside CI only, when there is none.
//
// The dump fault enumeration (package internal/faults/dumpfaults, the code
// TestFaultsDump runs on a sample) runs every fault point of every dump
// scenario and writes its tables into a block of the report; the restore
// fault enumeration (internal/faults/restorefaults, TestFaultsRestore's)
// every point and every block boundary. Four restorer processes with the
// same Owner drain 10,000 segments from a directory and from versitygw
// (internal/drainers, TestRestorersShareAStore's). Seed 002's restore jobs
// (internal/jobsim, TestJobsSeed002's): 10,000 jobs due over 60 s, 4 runner
// processes, 2 killed and restarted. The tests that run a deterministic
// sample or smaller sizes in CI run in full (DLQDUMP_FULL=1; fulltests.go),
// each a line of the report. Every Fuzz target runs
// for -fuzztime (10 minutes) and reports its executions per second. With -only and
// -out, the rows and blocks of the sections run replace theirs in the
// existing file and the rest of it is kept:
//
//	go run ./cmd/dlqdump-reliability -only enumeration -out docs/RELIABILITY.md
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/internal/faults/dumpfaults"
	"github.com/dlqdump/dlqdump/internal/faults/restorefaults"
	"github.com/dlqdump/dlqdump/internal/jobsim"
)

type options struct {
	rounds   int
	fuzztime time.Duration
	out      string
	short    bool
	only     string
	verbose  bool

	blocks []block // written after the table, in order
}

// block is a part of the Markdown report with a heading of its own, between
// markers so that a later run of its section can replace it.
type block struct {
	name string
	text string
}

// result is one line of the report.
type result struct {
	section string
	figures string
	bound   string
	ok      bool
	note    string
}

func main() {
	if mode := os.Getenv("DLQDUMP_RELIABILITY_CHILD"); mode != "" {
		os.Exit(runChild(mode))
	}
	if dumpfaults.IsChild() {
		os.Exit(dumpfaults.ChildMain())
	}
	if restorefaults.IsChild() {
		os.Exit(restorefaults.ChildMain())
	}
	if drainers.IsChild() {
		os.Exit(drainers.ChildMain())
	}
	if jobsim.IsChild() {
		os.Exit(jobsim.ChildMain())
	}
	var o options
	flag.IntVar(&o.rounds, "rounds", 30, "SIGKILL rounds in each crash loop")
	flag.DurationVar(&o.fuzztime, "fuzztime", 10*time.Minute, "time for each Fuzz target")
	flag.StringVar(&o.out, "out", "", "write the report as Markdown to this file (e.g. docs/RELIABILITY.md)")
	flag.BoolVar(&o.short, "short", false, "the CI version, a few minutes: fewer rounds, a smoke sample of each fault enumeration (go test runs CI's samples), a few hundred segments for the restorers, no full tests, 5s of fuzzing per target")
	flag.StringVar(&o.only, "only", "", "run only the sections whose name contains this")
	flag.BoolVar(&o.verbose, "v", false, "log the library's warnings to stderr")
	flag.Parse()
	if o.short {
		o.rounds = min(o.rounds, 8)
		o.fuzztime = min(o.fuzztime, 5*time.Second)
	}
	start := time.Now()
	sections := []struct {
		name string
		run  func(*options) []result
	}{
		{"dump crash loop", crashDump},
		{"restore crash loop", crashRestore},
		{"corruption sweep", corruptionSweep},
		{"disk full", diskFull},
		{"s3 faults", s3Faults},
		{"dump fault enumeration", faultsDump},
		{"restore fault enumeration", faultsRestore},
		{"stall enumeration", stalls},
		{"many restorers", manyRestorers},
		{"restore jobs", restoreJobs},
		{"full tests", fullTests},
		{"fuzzing", fuzzing},
	}
	var all []result
	var took []sectionTime
	for _, s := range sections {
		if o.only != "" && !strings.Contains(s.name, o.only) {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		t0 := time.Now()
		rs := s.run(&o)
		for _, r := range rs {
			fmt.Fprintf(os.Stderr, "   %s: %s (%s: must be %s) %s\n", r.section, r.figures, verdict(r), r.bound, r.note)
		}
		d := time.Since(t0)
		fmt.Fprintf(os.Stderr, "== %s: %s\n", s.name, d.Round(time.Second))
		took = append(took, sectionTime{s.name, d})
		all = append(all, rs...)
	}
	o.blocks = append([]block{{name: samplesBlock, text: samplesMarkdown()}}, o.blocks...)
	report(os.Stdout, all, &o, time.Since(start), false)
	sectionTimes(os.Stdout, took, time.Since(start))
	if o.out != "" {
		if err := writeReport(all, &o, time.Since(start)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	for _, r := range all {
		if !r.ok {
			os.Exit(1)
		}
	}
}

func verdict(r result) string {
	if r.ok {
		return "ok"
	}
	return "FAILED"
}

func report(w io.Writer, rs []result, o *options, took time.Duration, markdown bool) {
	cmd := "go run ./cmd/dlqdump-reliability " + strings.Join(os.Args[1:], " ")
	if markdown {
		fmt.Fprintf(w, "# Reliability report\n\nProduced by `%s` on %s (%s, %d cores, %s) in %s.\n\n",
			strings.TrimSpace(cmd), time.Now().UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), runtime.Version(), took.Round(time.Second))
		fmt.Fprintln(w, "| check | result | must be | verdict | notes |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
		for _, r := range rs {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.section, r.figures, r.bound, verdict(r), r.note)
		}
		fmt.Fprintln(w, "\nSee the sections of cmd/dlqdump-reliability for what each check does.")
		for _, b := range o.blocks {
			fmt.Fprintf(w, "\n%s", b.marked())
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\ncheck\tresult\tmust be\tverdict\tnotes\n")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.section, r.figures, r.bound, verdict(r), r.note)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s, %s\n", cmd, took.Round(time.Second))
}

// sectionTime is how long a section took.
type sectionTime struct {
	name string
	took time.Duration
}

// sectionTimes prints the table of the sections' times.
func sectionTimes(w io.Writer, ts []sectionTime, total time.Duration) {
	fmt.Fprintf(w, "\n%8s  %s\n", "seconds", "section")
	for _, t := range ts {
		fmt.Fprintf(w, "%8.0f  %s\n", t.took.Seconds(), t.name)
	}
	fmt.Fprintf(w, "%8.0f  %s\n", total.Seconds(), "total")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}

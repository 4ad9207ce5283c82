package main

import (
	"fmt"
	"strings"
)

// samplesBlock names the block of docs/RELIABILITY.md that says what CI
// samples and how to run it all.
const samplesBlock = "ci-samples"

// enumerations are the enumerations CI samples whose full versions are
// sections of this command: what CI runs (the go test run of
// scripts/test.sh, under the race detector), and how to run one in full.
var enumerations = []struct{ name, ci, full string }{
	{"dump fault enumeration",
		"TestFaultsDump, dumpfaults.CI: in each of the 7 scenarios, each operation's first and last call failing without effect and with effect; its last call killing the process before and after it and hanging past Shutdown's deadline; after each first fault that took effect, the first and last call it caused failing both ways",
		"`-only \"dump fault enumeration\"`, or `DLQDUMP_FAULTS=all go test -run TestFaultsDump .`"},
	{"restore fault enumeration",
		"TestFaultsRestore: on a directory, plain, restorefaults.CI (each operation's first and last call and one between, in the six modes; every fourth block boundary cancelled); through restore jobs and on versitygw the first and last call in the six modes (jobs: with the control requests at the first and last write); with a replay and a discard first, the first and last call in the six modes; on gofakes3 and encrypted, the first and last call failing in process (fail, lost); the six in parallel",
		"`-only \"restore fault enumeration\"` (versitygw for S3), or `DLQDUMP_RESTORE_FAULTS_FULL=1 go test -run TestFaultsRestore .`"},
	{"stall enumeration",
		"TestFaultsStalls, restorefaults.StallsCI: each holder's first and last effect paused before it, on a directory; its first on gofakes3",
		"`-only \"stall enumeration\"` (versitygw for S3), or `DLQDUMP_STALLS_FULL=1 go test -run TestFaultsStalls .`"},
}

// samplesMarkdown is the text of the samples block.
func samplesMarkdown() string {
	var b strings.Builder
	b.WriteString("## What CI samples, and running it all\n\n" +
		"CI (`.ci/run`, that is `./scripts/test.sh`) runs each enumeration on a deterministic sample under the race detector, " +
		"and `go run ./cmd/dlqdump-reliability -short` with a smoke sample of the three fault enumerations (the first and last call of each operation " +
		"failing, the first effect of each holder stalled: it checks that the sections and their stores, versitygw's among them, work). " +
		"`go run ./cmd/dlqdump-reliability` (no -short, about an hour on 2 cores) runs everything in full and writes this report with `-out docs/RELIABILITY.md`; " +
		"`-only SECTION` runs one section (its rows and blocks replace theirs in the file).\n\n")
	b.WriteString("| enumeration | CI's sample | in full |\n| --- | --- | --- |\n")
	for _, e := range enumerations {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", e.name, e.ci, e.full)
	}
	for _, t := range fullTestList {
		env := strings.Join(append([]string{"DLQDUMP_FULL=1"}, t.env...), " ")
		name := t.name
		if t.pkg != "." {
			name += " (" + strings.TrimPrefix(t.pkg, "./") + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s: `-only \"full tests\"`, or `%s go test -run '^%s$' %s` |\n", name, t.ci, t.full, env, t.name, t.pkg)
	}
	return b.String()
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// fuzzing runs every Fuzz target of the module for o.fuzztime each (10
// minutes; 5 seconds with -short) and reports its executions per second, from
// the fuzzer's last progress line. A failure is reported with the end of the
// fuzzer's output, which names the failing input it wrote to the package's
// testdata/fuzz. The targets are found in the sources: listing them with go
// test would run every package's TestMain.
//
// Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
// exceeded" as -fuzztime runs out, having found nothing (golang/go#75804,
// fixed in Go 1.27). A run that ends so, and wrote no failing input, is
// reported as held, with that said in its note.
func fuzzing(o *options) []result {
	list, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", "./...").Output()
	if err != nil {
		return []result{{section: "fuzzing", figures: "go list: " + err.Error()}}
	}
	type target struct{ pkg, dir, name string }
	var targets []target
	fuzzRe := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		pkg, dir, _ := strings.Cut(line, " ")
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, m := range fuzzRe.FindAllSubmatch(src, -1) {
				targets = append(targets, target{pkg: pkg, dir: dir, name: string(m[1])})
			}
		}
	}
	if len(targets) == 0 {
		return []result{{section: "fuzzing", figures: "no Fuzz targets found"}}
	}
	// The fuzzer's last progress line: "fuzz: elapsed: 10m0s, execs: 123 (45/sec), ...".
	progressRe := regexp.MustCompile(`elapsed: (\S+), execs: (\d+)`)
	var rs []result
	for _, t := range targets {
		start := time.Now()
		inputs := filepath.Join(t.dir, "testdata", "fuzz", t.name)
		before := fuzzInputs(inputs)
		fmt.Fprintf(os.Stderr, "   fuzzing %s.%s for %s\n", t.pkg, t.name, o.fuzztime)
		out, err := exec.Command("go", "test", "-run", "^$", "-fuzz", "^"+t.name+"$", "-fuzztime", o.fuzztime.String(), t.pkg).CombinedOutput()
		figures := "no progress line in the fuzzer's output"
		if m := progressRe.FindAllSubmatch(out, -1); len(m) > 0 {
			last := m[len(m)-1]
			execs, _ := strconv.ParseInt(string(last[2]), 10, 64)
			if elapsed, perr := time.ParseDuration(string(last[1])); perr == nil && elapsed > 0 {
				figures = fmt.Sprintf("%d execs in %s: %.0f execs/s", execs, elapsed, float64(execs)/elapsed.Seconds())
			} else {
				figures = fmt.Sprintf("%d execs in %s", execs, time.Since(start).Round(time.Second))
			}
		}
		r := result{
			section: "fuzz " + strings.TrimPrefix(t.pkg, "github.com/dlqdump/dlqdump/") + "." + t.name,
			figures: figures,
			bound:   fmt.Sprintf("no failure in %s", o.fuzztime),
			ok:      err == nil,
		}
		if err != nil && coordinatorRace(out, fuzzInputs(inputs) > before) {
			r.ok = true
			r.note = `the fuzzer ended with a bare "context deadline exceeded" and wrote no failing input: Go's fuzz coordinator race at the -fuzztime deadline (golang/go#75804), not a failure`
		} else if err != nil {
			tail := string(out)
			if len(tail) > 600 {
				tail = tail[len(tail)-600:]
			}
			r.note = strings.ReplaceAll(tail, "\n", " ")
		}
		rs = append(rs, r)
	}
	return rs
}

// fuzzInputs counts the inputs saved in a target's testdata/fuzz directory.
func fuzzInputs(dir string) int {
	entries, _ := os.ReadDir(dir)
	return len(entries)
}

// coordinatorRace tells whether a failed fuzzing run is Go's coordinator race
// at the deadline rather than a failure: it ended with "context deadline
// exceeded", wrote no failing input, and reported no crash of the target.
func coordinatorRace(out []byte, wroteInput bool) bool {
	s := string(out)
	return !wroteInput && strings.Contains(s, "context deadline exceeded") &&
		!strings.Contains(s, "Failing input written to") && !strings.Contains(s, "panic:")
}

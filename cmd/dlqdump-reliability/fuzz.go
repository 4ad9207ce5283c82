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
func fuzzing(o *options) []result {
	list, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", "./...").Output()
	if err != nil {
		return []result{{section: "fuzzing", figures: "go list: " + err.Error()}}
	}
	type target struct{ pkg, name string }
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
				targets = append(targets, target{pkg: pkg, name: string(m[1])})
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
		if err != nil {
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

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// fuzzing runs every Fuzz target of the module for o.fuzztime each. The
// targets are found in the sources: listing them with go test would run every
// package's TestMain.
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
	execsRe := regexp.MustCompile(`execs: (\d+)`)
	var rs []result
	for _, t := range targets {
		start := time.Now()
		out, err := exec.Command("go", "test", "-run", "^$", "-fuzz", "^"+t.name+"$", "-fuzztime", o.fuzztime.String(), t.pkg).CombinedOutput()
		execs := "?"
		if m := execsRe.FindAllSubmatch(out, -1); len(m) > 0 {
			execs = string(m[len(m)-1][1])
		}
		r := result{
			section: "fuzz " + strings.TrimPrefix(t.pkg, "github.com/dlqdump/dlqdump/") + "." + t.name,
			figures: fmt.Sprintf("%s execs in %s", execs, time.Since(start).Round(time.Second)),
			bound:   "no failure",
			ok:      err == nil,
		}
		if err != nil {
			tail := string(out)
			if len(tail) > 400 {
				tail = tail[len(tail)-400:]
			}
			r.note = strings.ReplaceAll(tail, "\n", " ")
		}
		rs = append(rs, r)
	}
	return rs
}

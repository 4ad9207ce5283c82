package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A full test's verdict is read from go test -v's output: its own line, not
// a subtest's nor another test's.
func TestFullTestResult(t *testing.T) {
	ft := fullTest{pkg: ".", name: "TestA", ci: "a sample", full: "everything"}
	out := []byte("=== RUN   TestA\n=== RUN   TestA/x\n    --- FAIL: TestA/x (0.10s)\n--- PASS: TestAB (1.00s)\n--- FAIL: TestA (2.50s)\nFAIL\n")
	r := fullTestResult(ft, out, errors.New("exit status 1"), time.Second)
	if r.ok || r.figures != "everything: fail in 2.50s" || r.section != "full test TestA" || r.note != "CI runs a sample" {
		t.Errorf("failed test: %+v", r)
	}
	r = fullTestResult(ft, []byte("--- PASS: TestA (12.00s)\nok\n"), nil, time.Second)
	if !r.ok || r.figures != "everything: passed in 12.00s" {
		t.Errorf("passed test: %+v", r)
	}
	r = fullTestResult(ft, []byte("panic: boom\n"), errors.New("exit status 2"), time.Second)
	if r.ok || !strings.Contains(r.figures, "no verdict") || !strings.Contains(r.figures, "panic: boom") {
		t.Errorf("no verdict: %+v", r)
	}
}

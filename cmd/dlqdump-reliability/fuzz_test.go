package main

import "testing"

// The fuzzer output of the CI run that failed on Go's coordinator race, and of
// a real failure, which names the input it wrote.
func TestCoordinatorRace(t *testing.T) {
	race := []byte("fuzz: elapsed: 3s, execs: 5068 (1689/sec), new interesting: 1 (total: 206)\n" +
		"fuzz: elapsed: 6s, execs: 5068 (0/sec), new interesting: 1 (total: 206)\n" +
		"--- FAIL: FuzzBlock (6.04s)\n    context deadline exceeded\nFAIL\nexit status 1\n")
	crash := []byte("fuzz: elapsed: 2s, execs: 812 (406/sec), new interesting: 3 (total: 210)\n" +
		"--- FAIL: FuzzBlock (2.10s)\n    --- FAIL: FuzzBlock (0.00s)\n        fuzz_test.go:320: record 3 changed\n\n" +
		"    Failing input written to testdata/fuzz/FuzzBlock/582528ddfad69eb5\n" +
		"    To re-run:\n    go test -run=FuzzBlock/582528ddfad69eb5\nFAIL\n")
	deadlineAndPanic := []byte("panic: runtime error: index out of range [3] with length 3\n" +
		"--- FAIL: FuzzBlock (6.01s)\n    context deadline exceeded\n")
	for _, tc := range []struct {
		name       string
		out        []byte
		wroteInput bool
		want       bool
	}{
		{"the race", race, false, true},
		{"the race, but an input was written", race, true, false},
		{"a failing input", crash, true, false},
		{"a failing input, the file not seen", crash, false, false},
		{"a panic at the deadline", deadlineAndPanic, false, false},
	} {
		if got := coordinatorRace(tc.out, tc.wroteInput); got != tc.want {
			t.Errorf("%s: coordinatorRace = %v, want %v", tc.name, got, tc.want)
		}
	}
}

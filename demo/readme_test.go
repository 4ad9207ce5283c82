package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeScenario returns the lines of docs/DEMO.md's console block that
// shows the headless scenario, without the command line (the README links
// that page).
func readmeScenario(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "DEMO.md"))
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "$ go run ./demo -scenario burst -duration 60s\n"
	_, after, ok := strings.Cut(string(b), "```console\n"+cmd)
	if !ok {
		t.Fatalf("docs/DEMO.md has no console block starting with %q", cmd)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("docs/DEMO.md: the scenario's console block is not closed")
	}
	return strings.Split(strings.TrimRight(block, "\n"), "\n")
}

var (
	demoDir      = regexp.MustCompile(`\S*dlqdump-demo-\d+`)
	demoNumber   = regexp.MustCompile(`\d+(\.\d+)?`)
	demoSpace    = regexp.MustCompile(`\s+`)
	demoReasons  = regexp.MustCompile(`handed to the dump:.*`)
	demoStatus   = regexp.MustCompile(`^N:N:N up `)
	demoUnitSecs = regexp.MustCompile(`N(ms|µs|s|m)`)
)

// shape returns a line with what varies from run to run taken out: the
// directory, the numbers, the reasons leaked, the alignment.
func shape(line string) string {
	line = demoDir.ReplaceAllString(line, "DIR")
	line = demoNumber.ReplaceAllString(line, "N")
	line = demoUnitSecs.ReplaceAllString(line, "D")
	line = regexp.MustCompile(`D(D|N)*`).ReplaceAllString(line, "D")
	line = demoReasons.ReplaceAllString(line, "handed to the dump: REASONS")
	return strings.TrimSpace(demoSpace.ReplaceAllString(line, " "))
}

// Issue 20: the README's headless output no longer matched what the demo
// prints (it showed a table the summary had long stopped printing). A short
// burst scenario, run as the README runs it (in a new temporary directory),
// prints the same lines as the README's block, numbers aside: the phases,
// the summary, where the segments are.
func TestReadmeScenarioOutput(t *testing.T) {
	want := readmeScenario(t)
	t.Setenv("TMPDIR", t.TempDir())
	var stdout, stderr syncBuffer
	args := []string{"-scenario", "burst", "-duration", "3s", "-drain-timeout", "60s", "-log-every", "0",
		"-flush", "200ms", "-restore-interval", "100ms"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		got = append(got, shape(l))
	}
	var summary []string
	inSummary := false
	for _, l := range want {
		s := shape(l)
		switch {
		case strings.HasPrefix(s, "scenario burst:"):
			inSummary = true
		case inSummary:
		case s == "" || demoStatus.MatchString(s):
			continue // status lines: left out of this run
		default:
			if !slices.Contains(got, s) {
				t.Errorf("the README shows %q; the demo printed no such line:\n%s", l, stdout.String())
			}
			continue
		}
		summary = append(summary, s)
	}
	i := slices.IndexFunc(got, func(s string) bool { return strings.HasPrefix(s, "scenario burst:") })
	if i < 0 {
		t.Fatalf("no summary:\n%s", stdout.String())
	}
	if !slices.Equal(got[i:], summary) {
		t.Errorf("the summary differs from the README's:\ngot:\n%s\nREADME:\n%s\nprinted:\n%s",
			strings.Join(got[i:], "\n"), strings.Join(summary, "\n"), stdout.String())
	}
}

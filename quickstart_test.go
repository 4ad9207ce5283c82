package dlqdump_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
)

// quickstart is the README's quick start: the setup lines, the program and
// the lines that run it.
type quickstart struct {
	setup, program, run []string
}

// readmeQuickstart returns the blocks of the README's "Quick start"
// section: a sh block (the setup), the go block marked
// <!-- program: quickstart -->, and a sh block of commands.
func readmeQuickstart(t *testing.T) quickstart {
	t.Helper()
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## Quick start\n")
	if !ok {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	type block struct {
		lang, marker string
		lines        []string
	}
	var blocks []block
	lines := strings.Split(section, "\n")
	marker := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if programMarker.MatchString(strings.TrimSpace(l)) {
			marker = strings.TrimSpace(l)
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		b := block{lang: strings.TrimPrefix(l, "```"), marker: marker}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			b.lines = append(b.lines, lines[i])
		}
		blocks = append(blocks, b)
		marker = ""
	}
	if len(blocks) != 3 || blocks[0].lang != "sh" || blocks[1].lang != "go" || blocks[2].lang != "sh" ||
		blocks[1].marker != "<!-- program: quickstart -->" {
		t.Fatalf("the quick start must be a sh block (setup), the go block marked <!-- program: quickstart --> and a sh block (the commands); found %d blocks: %+v", len(blocks), blocks)
	}
	return quickstart{setup: blocks[0].lines, program: blocks[1].lines, run: blocks[2].lines}
}

// Issue 30: the README's quick start is followed as written by a program
// that loses nothing. The program is the README's go block, built in a
// module of its own against this clone (the setup's go get, done offline: a
// replace of the module by the clone, the module cache for the rest); the
// dlqdump command is built from ./cmd/dlqdump (the setup's go install).
// Every line of the commands' block then runs as written, in that module's
// directory, with sh: the dump, the CLI, the console (on a port of its own:
// the test adds --addr 127.0.0.1:0, fetches the page and interrupts it), the
// restore job. What the README says must be so: 800 of the 1,000 orders
// charged by the dump, 200 failed into ./dlq, the job delivering the 200,
// and then each of the 1,000 orders charged exactly once, nothing left in
// the dump.
func TestReadmeQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and the command: not in -short")
	}
	qs := readmeQuickstart(t)
	if !slices.ContainsFunc(qs.setup, func(l string) bool { return strings.Contains(l, "go mod init quickstart") }) {
		t.Fatalf("the setup block does not make the module quickstart (go mod init quickstart):\n%s", strings.Join(qs.setup, "\n"))
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	mod := filepath.Join(dir, "quickstart")
	for _, d := range []string{bin, mod} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", strings.Join(qs.program, "\n")+"\n")
	write("go.mod", "module quickstart\n\ngo 1.26\n\nrequire github.com/dlqdump/dlqdump v0.0.0\n\nreplace github.com/dlqdump/dlqdump => "+root+"\n")
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	gocmd := func(dir string, args ...string) {
		t.Helper()
		c := exec.Command("go", args...)
		c.Dir, c.Env = dir, env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gocmd(mod, "mod", "tidy")
	gocmd(root, "build", "-o", filepath.Join(bin, "dlqdump"), "./cmd/dlqdump")

	out := map[string]string{}
	for _, line := range qs.run {
		cmd, _, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		if cmd == "" {
			continue
		}
		if strings.HasPrefix(cmd, "dlqdump ui ") {
			out[cmd] = runConsole(t, mod, env, cmd)
			continue
		}
		c := exec.Command("sh", "-c", cmd)
		c.Dir, c.Env = mod, env
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, b)
		}
		out[cmd] = string(b)
		if cmd == "go run . dump" {
			// The README: 800 charged, 200 failed into ./dlq.
			if n := len(chargedOrders(t, mod)); n != 800 {
				t.Errorf("after %q, charged.txt holds %d orders; the README says 800", cmd, n)
			}
		}
	}
	expect := func(cmd string, re string) {
		t.Helper()
		got, ok := out[cmd]
		if !ok {
			t.Errorf("the quick start no longer runs %q", cmd)
			return
		}
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("%s printed\n%s\nwant a match for %s", cmd, got, re)
		}
	}
	expect("dlqdump stat dlq --by reason", `(?m)^records\s+200$`)
	expect("dlqdump stat dlq --by reason", `(?m)^\s+failed\s+200\s+100\.0%`)
	expect("dlqdump cat dlq --limit 1", `"reason":"failed"`)
	expect("dlqdump errors dlq", `(?m)^\s*200 .*payment service: timeout$`)
	expect("go run . restore", `(?m)^job redrive-1 completed: 200 orders delivered$`)
	expect("dlqdump job show dlq redrive-1", `(?m)^delivered\s+200$`)
	expect("dlqdump ui dlq", `"ready":\{"segments":1,"records":200,`)

	// Each of the 1,000 orders charged exactly once, nothing left.
	charged := chargedOrders(t, mod)
	seen := map[string]int{}
	for _, id := range charged {
		seen[id]++
	}
	for i := range 1000 {
		if id := fmt.Sprintf("ord-%d", i); seen[id] != 1 {
			t.Errorf("%s charged %d times", id, seen[id])
		}
	}
	if len(charged) != 1000 || len(seen) != 1000 {
		t.Errorf("charged.txt: %d lines, %d orders; want 1000 of each", len(charged), len(seen))
	}
	if got := stored(&fs.Reader{Directory: filepath.Join(mod, "dlq")}); got != "0 records stored" {
		t.Errorf("after the quick start the dump holds %s, want none", got)
	}
}

// chargedOrders returns the lines of the quick start's charged.txt.
func chargedOrders(t *testing.T, mod string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mod, "charged.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// runConsole runs the README's `dlqdump ui` line on a port of its own,
// fetches the console's page and its overview, interrupts it as Ctrl-C
// does, and returns the overview.
func runConsole(t *testing.T, mod string, env []string, cmd string) string {
	t.Helper()
	c := exec.Command("sh", "-c", "exec "+cmd+" --addr 127.0.0.1:0")
	c.Dir, c.Env = mod, env
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Process.Signal(syscall.SIGINT)
		// Interrupted, as by Ctrl-C: dlqdump's exit status 130.
		if err := c.Wait(); c.ProcessState == nil || c.ProcessState.ExitCode() != 130 {
			t.Errorf("%s, interrupted: %v, want exit status 130", cmd, err)
		}
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`at (http://\S+/)`).FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		close(urls)
	}()
	var url string
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("%s printed no address", cmd)
		}
		url = u
	case <-time.After(time.Minute):
		t.Fatalf("%s printed no address within a minute", cmd)
	}
	get := func(path string) string {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s: %s\n%s", url, path, resp.Status, b)
		}
		return string(b)
	}
	if page := get(""); !strings.Contains(page, "<html") && !strings.Contains(page, "<!doctype") && !strings.Contains(page, "<!DOCTYPE") {
		t.Errorf("%s: the page is no HTML:\n%.300s", cmd, page)
	}
	return get("api/overview")
}

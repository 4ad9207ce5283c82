package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// dumpJSON dumps n JSON payloads {"n":i,"email":"User<i>@EXAMPLE.com"}
// (the email a number for every tenth, i%10 == 3) with the error header
// errorOf(i), into a new directory.
func dumpJSON(t *testing.T, n int, errorOf func(i int) string) string {
	t.Helper()
	dir := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 4 * dlqdump.Megabyte})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p := fmt.Sprintf(`{"n":%d,"email":"User%d@EXAMPLE.com"}`, i, i)
		if i%10 == 3 {
			p = fmt.Sprintf(`{"n":%d,"email":%d}`, i, i)
		}
		h := dlqdump.Headers{dlqdump.HeaderReason: "failed"}
		if errorOf != nil {
			h[dlqdump.HeaderError] = errorOf(i)
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: []byte(p), Headers: h}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRestoreJQ(t *testing.T) {
	dir := dumpJSON(t, 20, nil)
	const prog = `.payload.email |= ascii_downcase`
	r := cli(t, 0, "restore", dir, "--jq", prog, "--dry-run", "--sample", "5")
	for _, want := range []string{"would deliver    18 records", "quarantine: transform", "--- stored ", "+++ delivered ",
		`-    "email": "User0@EXAMPLE.com",`, `+    "email": "user0@example.com",`, "would quarantine ", "ascii_downcase cannot be applied to: number (3)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run: no %q in\n%s", want, r.stdout)
		}
	}
	r = cli(t, exitUndelivered, "restore", dir, "--jq", prog)
	if n := strings.Count(r.stdout, `@example.com`); n != 18 || strings.Contains(r.stdout, "EXAMPLE") {
		t.Errorf("restore --jq delivered:\n%s", r.stdout)
	}
	q := cli(t, 0, "cat", dir, "--area", "quarantine")
	if n := strings.Count(q.stdout, `transform: jq: ascii_downcase cannot be applied`); n != 2 || !strings.Contains(q.stdout, `{\"n\":3,\"email\":3}`) {
		t.Errorf("quarantine:\n%s", q.stdout)
	}

	r = cli(t, exitUsage, "restore", dir, "--jq", ".payload.email |= ascii_downcas", "--dry-run")
	if !strings.Contains(r.stderr, "--jq: bad jq program: at column 19 (\"ascii_downcas\"): function not defined: ascii_downcas/0") ||
		!strings.Contains(r.stderr, "\n"+strings.Repeat(" ", 20)+"^^^^^^^^^^^^^\n") {
		t.Errorf("a bad program: %s", r)
	}
	r = cli(t, exitUsage, "job", "create", dir, "--jq", ".payload | {")
	if !strings.Contains(r.stderr, "--jq: bad jq program: at column 13 (the end): unexpected EOF") {
		t.Errorf("job create, a bad program: %s", r)
	}
	id := strings.TrimSpace(cli(t, 0, "job", "create", dir, "--jq", prog).stdout)
	if r := cli(t, 0, "job", "show", dir, id); !strings.Contains(r.stdout, "ascii_downcase") {
		t.Errorf("job show: %s", r)
	}
}

// --jq-keep-layout delivers the payloads with their stored layout but for
// the field the program changes, and a job created with it keeps it.
func TestRestoreJQKeepLayout(t *testing.T) {
	dir := dumpJSON(t, 20, nil)
	const prog = `.payload.email |= ascii_downcase`
	r := cli(t, exitUndelivered, "restore", dir, "--jq", prog, "--jq-keep-layout")
	if n := strings.Count(r.stdout, `"payload":"{\"n\":`); n != 18 || !strings.Contains(r.stdout, `"{\"n\":0,\"email\":\"user0@example.com\"}"`) || strings.Contains(r.stdout, "EXAMPLE") {
		t.Errorf("restore --jq --jq-keep-layout delivered:\n%s", r.stdout)
	}
	r = cli(t, exitUsage, "restore", dir, "--jq-keep-layout")
	if !strings.Contains(r.stderr, "--jq-keep-layout: without --jq") {
		t.Errorf("--jq-keep-layout alone: %s", r)
	}
	id := strings.TrimSpace(cli(t, 0, "job", "create", dir, "--jq", prog, "--jq-keep-layout").stdout)
	if r := cli(t, 0, "job", "show", dir, id); !strings.Contains(r.stdout, "kept (--jq-keep-layout)") {
		t.Errorf("job show: %s", r)
	}
}

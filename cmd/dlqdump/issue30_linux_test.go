//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// dlqdump restore DIR without --to, on a terminal, says that it prints the
// records there and deletes them, and asks: declined, nothing is restored;
// with stdin not a terminal, it does not start. Redirected, it restores as
// before.
func TestRestoreToATerminalAsks(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		stdinTTY     bool
		wantCode     int
		deleted      bool
	}{
		{"declined", "n\n", true, exitError, false},
		{"accepted", "y\n", true, 0, true},
		{"no-answer", "", false, exitUsage, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeSample(t)
			before := len(areaNames(t, dir, 0))
			master, slave := openPTY(t)
			defer master.Close()
			defer slave.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "restore", dir)
			cmd.Env = baseEnv()
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = slave, &stderr
			if tc.stdinTTY {
				cmd.Stdin = slave
			} else {
				cmd.Stdin = strings.NewReader("y\n")
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.answer != "" {
				if _, err := master.WriteString(tc.answer); err != nil {
					t.Fatal(err)
				}
			}
			// Drain the terminal so the child never blocks writing.
			go func() { _, _ = bufio.NewReader(master).WriteTo(new(bytes.Buffer)) }()
			err := cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), "prints the records on this terminal and deletes them") ||
				!strings.Contains(stderr.String(), "dlqdump cat") {
				t.Errorf("it does not say what it does; stderr:\n%s", stderr.String())
			}
			after := len(areaNames(t, dir, 0))
			if deleted := after < before; deleted != tc.deleted {
				t.Errorf("%d ready segments before, %d after; want deleted %v", before, after, tc.deleted)
			}
		})
	}
	// Redirected, nothing is asked.
	dir := makeSample(t)
	r := cli(t, 0, "restore", dir)
	if strings.Contains(r.stderr, "on this terminal") || r.stdout == "" {
		t.Errorf("restore to a pipe; %s", r)
	}
}

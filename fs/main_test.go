package fs_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// childEnv selects what the test binary does when a test re-executes it as
// another process.
const childEnv = "DLQDUMP_FS_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "part-writer":
		os.Exit(partWriter())
	case "stop-in-write":
		os.Exit(stopInWrite())
	case "stop-in-renew":
		os.Exit(stopInRenew())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, os.Getenv(childEnv))
		os.Exit(2)
	}
}

// partWriter starts the segment DLQDUMP_FS_SEGMENT in the quarantine of
// DLQDUMP_FS_DIR with Reader.Create, writes and syncs some bytes, says
// "written", and waits until killed without committing: a restorer setting
// records aside, or a copy, that dies halfway.
func partWriter() int {
	ctx := context.Background()
	rd := &fs.Reader{Directory: os.Getenv("DLQDUMP_FS_DIR")}
	sw, err := rd.Create(ctx, sink.AreaQuarantine, os.Getenv("DLQDUMP_FS_SEGMENT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		return 1
	}
	if _, err := sw.Write([]byte("half of a copy")); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		return 1
	}
	if err := sw.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, "sync:", err)
		return 1
	}
	fmt.Println("written")
	select {}
}

// child is a test binary run as another process, with its output by line.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	killed bool
}

// startChild runs this test binary as a child doing what mode says, with env
// added to its environment. It is killed at the end of the test.
func startChild(t *testing.T, mode string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 100)}
	t.Cleanup(c.kill)
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// waitFor waits until the child says want. The bound is only there to end a
// run that went wrong; no test result depends on it.
func (c *child) waitFor(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("the child exited before saying %q", want)
			}
			if l == want {
				return
			}
		case <-timeout:
			t.Fatalf("the child did not say %q within a minute", want)
		}
	}
}

// kill kills the child and waits for it to be gone.
func (c *child) kill() {
	if c.killed {
		return
	}
	c.killed = true
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

package dumpfaults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/internal/faults"
)

// EnvChild is the environment variable that makes ChildMain run one dump: it
// holds the run's spec as JSON.
const EnvChild = "DLQDUMP_FAULTS_CHILD"

// childCap bounds a child process; past it the child is killed and the run
// reported as hung. A child takes a second or less.
const childCap = 3 * time.Minute

// childSpec is what a child process runs.
type childSpec struct {
	Scenario string `json:"scenario"`
	Point    string `json:"point"`
	Store    *Store `json:"store"`
}

// IsChild reports whether this process was started to run ChildMain.
func IsChild() bool { return os.Getenv(EnvChild) != "" }

// ChildMain runs the dump EnvChild describes, writing its lines to stdout,
// and returns the exit code. The fault kills the process (Crash, CrashAfter)
// or makes the run give up and shut the Queue down (Stall, StallAfter); the caller then
// exits at once, without cleaning up, as a program that exits after Shutdown
// does. Call it from main or TestMain when IsChild.
func ChildMain() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(EnvChild)), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "dumpfaults child: %s: %v\n", EnvChild, err)
		return 2
	}
	sc, err := ScenarioNamed(spec.Scenario)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dumpfaults child:", err)
		return 2
	}
	p, err := faults.ParsePoint(spec.Point)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dumpfaults child:", err)
		return 2
	}
	var mu sync.Mutex
	emit := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		// Unbuffered: a line is out before the process can die.
		_, _ = os.Stdout.WriteString(line + "\n")
	}
	r := newRun(context.Background(), []faults.Point{p}, emit)
	dump(r.ctx, sc, func() dlqdump.Writer { return spec.Store.writer(sc, r.in, slog.New(slog.DiscardHandler)) }, emit)
	return 0
}

// runChild runs the scenario in a child process with the fault at p, then
// restarts on the store in this process and checks.
func (h *Harness) runChild(ctx context.Context, sc Scenario, st *Store, p faults.Point) (*Result, error) {
	if h.Child == nil {
		return nil, errors.New("dumpfaults: Harness.Child is required for crash and stall points")
	}
	spec, err := json.Marshal(childSpec{Scenario: sc.Name, Point: p.String(), Store: st})
	if err != nil {
		return nil, err
	}
	cmd := h.Child()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, EnvChild+"="+string(spec))
	var stderr tailBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dumpfaults: start child: %w", err)
	}
	linesc := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		_, _ = io.Copy(io.Discard, stdout)
		linesc <- lines
	}()
	var hung bool
	capTimer := time.NewTimer(childCap)
	var lines []string
	select {
	case lines = <-linesc:
	case <-capTimer.C:
		hung = true
		_ = cmd.Process.Kill()
		lines = <-linesc
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-linesc
		_ = cmd.Wait()
		return nil, ctx.Err()
	}
	capTimer.Stop()
	werr := cmd.Wait()
	res := &Result{Scenario: sc.Name, Point: &p, Lines: lines}
	o := &observation{sc: sc, point: &p}
	if o.log, err = parseLog(lines); err != nil {
		return nil, err
	}
	res.Reached = hasLine(lines, lineFault+" ")
	o.killed = p.Mode.Kills() && res.Reached && !o.log.done
	switch {
	case hung:
		o.log.hung = fmt.Sprintf("the child did not end within %s; its last lines: %s", childCap, lastLines(lines, 3))
	case werr != nil && !o.killed:
		return nil, fmt.Errorf("dumpfaults: child %s: %v; stderr: %s", res, werr, stderr.String())
	}
	if o.log.returned {
		// The child ended right after Close returned: the store is as
		// Close left it.
		if o.atClose, err = st.contents(ctx, sc); err != nil {
			return nil, fmt.Errorf("dumpfaults: read the store after the child: %w", err)
		}
	}
	if err := h.observeAfter(ctx, o, st); err != nil {
		return nil, err
	}
	res.Violations = check(o)
	return res, nil
}

func hasLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func lastLines(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if t.buf.Len() > 8<<10 {
		b := t.buf.Bytes()[t.buf.Len()-4<<10:]
		t.buf.Reset()
		t.buf.Write(b)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

//go:build unix

package main

// The fault points of the Proof (issue 12): a command runs in a child
// process (this test binary, in the mode faultChild selects) whose every sink
// operation goes through a faultReader; the child interrupts itself with
// SIGKILL or SIGINT right after its k-th operation took effect, or the HTTP
// destination interrupts it when the k-th record arrives (delivered, the
// child not yet told). Then the checks of each scenario run, a dry run must
// change nothing, the command is run again, and its outcome is checked.
//
// k runs over the operation count of each scenario (counted by a run without
// faults). The normal test run takes a deterministic sample of the points;
// DLQDUMP_FAULT_FULL=1 takes every one.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/sink"
)

const (
	faultArgsEnv = "DLQDUMP_FAULT_ARGS" // JSON: the command line of a child
	faultAtEnv   = "DLQDUMP_FAULT_AT"   // interrupt after this sink operation (from 1); 0: never
	faultSigEnv  = "DLQDUMP_FAULT_SIG"  // KILL, INT or STOP
	faultLogEnv  = "DLQDUMP_FAULT_LOG"  // the child appends a line per sink operation there
	faultFullEnv = "DLQDUMP_FAULT_FULL" // 1: every fault point, not a sample
)

// faultChild runs the command line in argsJSON as the dlqdump binary would,
// through faultReaders, and returns its exit status.
func faultChild(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, "fault child:", err)
		return 1
	}
	f := &faults{sig: os.Getenv(faultSigEnv)}
	f.at, _ = strconv.Atoi(os.Getenv(faultAtEnv))
	if p := os.Getenv(faultLogEnv); p != "" {
		var err error
		if f.log, err = os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fault child:", err)
			return 1
		}
	}
	wrapReader = func(r sink.Reader) sink.Reader { return &faultReader{Reader: r, f: f} }
	return run(args, os.Stdout, os.Stderr)
}

// faults counts the sink operations of a child and interrupts it at one.
type faults struct {
	mu  sync.Mutex
	n   int
	at  int
	sig string
	log *os.File
}

// op counts an operation that took effect (or failed) and interrupts the
// process if it is the chosen one.
func (f *faults) op(format string, args ...any) {
	f.mu.Lock()
	f.n++
	n := f.n
	if f.log != nil {
		fmt.Fprintf(f.log, "%d %s\n", n, fmt.Sprintf(format, args...))
	}
	f.mu.Unlock()
	if n != f.at {
		return
	}
	switch f.sig {
	case "KILL":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		for {
			time.Sleep(time.Hour) // SIGKILL is on its way
		}
	case "INT":
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	case "STOP":
		// Stopped past its lease, as by a GC pause or a VM migration:
		// the whole process, renewals included, until the test
		// continues it (whenStopped).
		childproc.StopSelf()
	}
}

// short names a segment in the operation log.
func short(name string) string {
	if len(name) > 10 {
		return name[len(name)-10:]
	}
	return name
}

// faultReader counts the operations of a sink.Reader.
type faultReader struct {
	sink.Reader
	f *faults
}

func (r *faultReader) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		defer r.f.op("list %s", area)
		for si, err := range r.Reader.List(ctx, area) {
			if !yield(si, err) {
				return
			}
		}
	}
}

func (r *faultReader) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := r.Reader.Open(ctx, area, name)
	r.f.op("open %s %s", area, short(name))
	return f, err
}

func (r *faultReader) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	sw, err := r.Reader.Create(ctx, area, name)
	r.f.op("create %s %s", area, short(name))
	if err != nil {
		return nil, err
	}
	return &faultWriter{SegmentWriter: sw, f: r.f, name: short(name)}, nil
}

func (r *faultReader) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	err := r.Reader.Move(ctx, name, from, to, reason)
	r.f.op("move %s %s->%s", short(name), from, to)
	return err
}

func (r *faultReader) Unstage(ctx context.Context, staged, name string, to sink.Area, reason string) error {
	err := r.Reader.Unstage(ctx, staged, name, to, reason)
	r.f.op("unstage %s %s", short(name), to)
	return err
}

// Table hands out the inner Reader's tables unwrapped (the jobs' records).
func (r *faultReader) Table(name string) (sink.Records, error) {
	tb, ok := r.Reader.(sink.Tables)
	if !ok {
		return nil, fmt.Errorf("%T keeps no tables", r.Reader)
	}
	return tb.Table(name)
}

func (r *faultReader) Delete(ctx context.Context, area sink.Area, name string) error {
	err := r.Reader.Delete(ctx, area, name)
	r.f.op("delete %s %s", area, short(name))
	return err
}

func (r *faultReader) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	b, v, err := r.Reader.ReadRecord(ctx, name)
	r.f.op("read-record %s", short(name))
	return b, v, err
}

func (r *faultReader) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	v, err := r.Reader.WriteRecord(ctx, name, data, ifVersion)
	r.f.op("write-record %s", short(name))
	return v, err
}

func (r *faultReader) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	err := r.Reader.DeleteRecord(ctx, name, ifVersion)
	r.f.op("delete-record %s", short(name))
	return err
}

func (r *faultReader) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		defer r.f.op("record-names")
		for n, err := range r.Reader.RecordNames(ctx) {
			if !yield(n, err) {
				return
			}
		}
	}
}

// Recover lets a Restorer recover the sink, as it would without the
// wrapper.
func (r *faultReader) Recover(ctx context.Context) ([]string, error) {
	rc, ok := r.Reader.(sink.Recoverer)
	if !ok {
		return nil, nil
	}
	names, err := rc.Recover(ctx)
	r.f.op("recover")
	return names, err
}

// faultWriter counts the writes and the commit of a segment.
type faultWriter struct {
	sink.SegmentWriter
	f    *faults
	name string
}

func (w *faultWriter) Write(p []byte) (int, error) {
	n, err := w.SegmentWriter.Write(p)
	w.f.op("write %s", w.name)
	return n, err
}

func (w *faultWriter) Commit(ctx context.Context) error {
	err := w.SegmentWriter.Commit(ctx)
	w.f.op("commit %s", w.name)
	return err
}

// childRun is how a child ended.
type childRun struct {
	result
	killed bool     // by SIGKILL
	ops    []string // its sink operations, in order
}

// runChild runs the command line args in a child interrupted by sig after
// its at-th sink operation (at 0: never). started, if set, gets the process
// once it runs (the destination may interrupt it instead).
func runChild(t *testing.T, env, args []string, at int, sig string, started func(*os.Process)) childRun {
	t.Helper()
	js, _ := json.Marshal(args)
	logPath := filepath.Join(t.TempDir(), "ops.log")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(append(baseEnv(), env...),
		faultArgsEnv+"="+string(js), faultAtEnv+"="+strconv.Itoa(at), faultSigEnv+"="+sig, faultLogEnv+"="+logPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if started != nil {
		started(cmd.Process)
	}
	err := cmd.Wait()
	r := childRun{result: result{args: args}}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			switch st.Signal() {
			case syscall.SIGKILL:
				r.killed = true
			case syscall.SIGINT:
				// Interrupted as the command ended, after it stopped
				// handling signals: what a shell reports as 130.
				r.code = exitInterrupted
			}
		}
	default:
		t.Fatalf("child %v: %v", args, err)
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "WARNING: DATA RACE") {
		t.Fatalf("the child crashed; %s", r.result)
	}
	if b, err := os.ReadFile(logPath); err == nil {
		r.ops = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) == 0 {
			r.ops = nil
		}
	}
	return r
}

// faultPoints returns the points to interrupt at among 1..n: all of them
// with DLQDUMP_FAULT_FULL=1, else a deterministic sample of about per of
// them, spread evenly over those that change the store when ops (the
// operations of a run without faults) is given, else over all.
func faultPoints(n int, ops []string, per int) []int {
	var all []int
	for k := 1; k <= n; k++ {
		all = append(all, k)
	}
	if os.Getenv(faultFullEnv) == "1" || n <= per {
		return all
	}
	if ops != nil {
		var changing []int
		for i, op := range ops {
			if i < n && isChange(op) {
				changing = append(changing, i+1)
			}
		}
		if len(changing) > 0 {
			all = changing
		}
	}
	if len(all) <= per {
		return all
	}
	var ks []int
	for i := range per {
		k := all[i*(len(all)-1)/(per-1)]
		if len(ks) == 0 || ks[len(ks)-1] != k {
			ks = append(ks, k)
		}
	}
	return ks
}

// stallPoints returns the points right after a holder's last fencing write
// before each delete or move of a ready segment (ops are the operations of a
// run without faults): a holder stopped there past its lease, while
// another takes its claim over, must not delete or move what the other
// restores (issue 30).
func stallPoints(ops []string) []int {
	var ks []int
	for i, op := range ops {
		f := strings.Fields(op)
		var name string
		switch {
		case len(f) >= 4 && f[1] == "delete" && f[2] == "ready":
			name = f[3]
		case len(f) >= 4 && f[1] == "move" && strings.HasPrefix(f[3], "ready->"):
			name = f[2]
		default:
			continue
		}
		for j := i - 1; j >= 0; j-- {
			g := strings.Fields(ops[j])
			if len(g) >= 3 && g[1] == "write-record" && g[2] == name {
				ks = append(ks, j+1)
				break
			}
		}
	}
	return ks
}

// union returns the points of a and b, sorted, once each.
func union(a, b []int) []int {
	out := slices.Clone(a)
	for _, k := range b {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// isChange reports whether a logged operation ("12 commit NAME") changes the
// store.
func isChange(op string) bool {
	f := strings.Fields(op)
	if len(f) < 2 {
		return false
	}
	switch f[1] {
	case "create", "write", "commit", "move", "unstage", "delete", "write-record", "delete-record", "recover":
		return true
	}
	return false
}

// tempFiles lists the temporary files under dir: ".NAME.part" (a copy or a
// restorer's side segment being written) and ".NAME.open" (a Queue's).
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for p := range tree(t, dir) {
		b := filepath.Base(p)
		if strings.HasPrefix(b, ".") && (strings.HasSuffix(b, ".part") || strings.HasSuffix(b, ".open")) {
			out = append(out, p)
		}
	}
	return out
}

// checkDryRun checks that a dry-run restore of dir changes nothing in it.
func checkDryRun(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return
	}
	before := tree(t, dir)
	r := cli(t, -1, "restore", dir, "--dry-run")
	if r.code != 0 && r.code != exitError {
		t.Errorf("dry run: %s", r)
	}
	if d := treeDiff(before, tree(t, dir)); d != "" {
		t.Errorf("a dry run after the interruption changed %s: %s; %s", dir, d, r)
	}
}

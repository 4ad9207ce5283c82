package dlqdump_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

func init() {
	children["restore-killer"] = restoreKillerChild
}

// restoreKillerChild makes one pass over DLQDUMP_DIR into a destination that
// prints every item it accepts and SIGKILLs the process right after
// accepting the DLQDUMP_KILL_AT-th one (0: never). DLQDUMP_WHERE=k=v filters
// the pass. With DLQDUMP_ENVELOPE set, records are delivered as Envelopes
// and printed as ID|ITEM. DLQDUMP_AHEAD=N transforms the records (a copy of
// each payload) with TransformWorkers N.
func restoreKillerChild() int {
	killAt, _ := strconv.Atoi(os.Getenv("DLQDUMP_KILL_AT"))
	envelope := os.Getenv("DLQDUMP_ENVELOPE") != ""
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	n := 0
	dst := queueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		if env, ok := x.(*dlqdump.Envelope); ok {
			x = env.Headers[dlqdump.HeaderRecordID] + "|" + env.Item.(string)
		}
		out.WriteString(x.(string) + "\n")
		if err := out.Flush(); err != nil {
			return err
		}
		if n++; n == killAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	opts := dlqdump.RunOptions{}
	if n, _ := strconv.Atoi(os.Getenv("DLQDUMP_AHEAD")); n > 0 {
		opts.TransformWorkers = n
		opts.Transform = func(_ context.Context, r *dlqdump.Replay) error {
			r.Payload = bytes.Clone(r.Payload)
			return nil
		}
	}
	if w := os.Getenv("DLQDUMP_WHERE"); w != "" {
		k, v, _ := strings.Cut(w, "=")
		opts.Where = dlqdump.Headers{k: v}
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader:          &fs.Reader{Directory: os.Getenv("DLQDUMP_DIR")},
		Decoder:         poisonDecoder{},
		Queue:           dst,
		Lease:           150 * time.Millisecond,
		DeliverEnvelope: envelope,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A killed predecessor's claim is taken over once unchanged for a
	// lease: pass until nothing is claimed by anyone else.
	for {
		rep, err := r.Run(context.Background(), opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
			return 1
		}
		if rep.Claimed == 0 {
			return 0
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// runKiller runs restoreKillerChild and returns what it delivered.
func runKiller(t *testing.T, dir string, killAt int, where string, env ...string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=restore-killer", "DLQDUMP_DIR="+dir,
		"DLQDUMP_KILL_AT="+strconv.Itoa(killAt), "DLQDUMP_WHERE="+where)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	killed := false
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	if killAt > 0 && !killed {
		t.Fatalf("the restorer was to be killed at its %d-th delivery: %v", killAt, err)
	}
	if killAt == 0 && err != nil {
		t.Fatalf("restorer: %v", err)
	}
	return strings.Fields(string(b))
}

// Issue 12, defect 1: a restorer killed while records it set aside (one
// undecodable record, or the records a filtered pass does not select) wait
// to be written must not repeat more than the block it was in; the records
// set aside are written once.
func TestKilledWithRecordsSetAside(t *testing.T) {
	for _, tc := range []struct {
		name    string
		where   string
		killAt  []int
		mkItems func() ([]string, []dlqdump.Envelope)
		env     []string // of the restorer
	}{
		{"undecodable", "", []int{15000}, func() ([]string, []dlqdump.Envelope) {
			items := append([]string{"poison-first"}, itemsN("g", 20000)...)
			return items, nil
		}, nil},
		{"filtered", "reason=failed", []int{3000, 2000}, func() ([]string, []dlqdump.Envelope) {
			var items []string
			var envs []dlqdump.Envelope
			for i, it := range itemsN("f", 20000) {
				reason := []string{"failed", "leak"}[i%2]
				items = append(items, it)
				envs = append(envs, dlqdump.Envelope{Item: it, Headers: dlqdump.Headers{dlqdump.HeaderReason: reason}})
			}
			return items, envs
		}, nil},
		// Killed while the next block's records are transformed ahead:
		// still at most the block being delivered twice.
		{"transformed ahead", "", []int{15000, 4000}, func() ([]string, []dlqdump.Envelope) {
			return append([]string{"poison-first"}, itemsN("a", 20000)...), nil
		}, []string{"DLQDUMP_AHEAD=3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			items, envs := tc.mkItems()
			cfg := dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 8 * dlqdump.Kilobyte, Writer: &fs.Writer{Directory: dir}}
			q := newQueue(t, cfg)
			for i, it := range items {
				var x any = it
				if envs != nil {
					x = envs[i]
				}
				if err := q.Enqueue(x); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			_, maxBlock := blockSizes(t, dir)
			records := readDir(t, dir)
			var rounds [][]string
			for _, k := range tc.killAt {
				rounds = append(rounds, runKiller(t, dir, k, tc.where, tc.env...))
			}
			if tc.where != "" {
				// The filtered pass goes on to the end, then an
				// unfiltered one restores the rest.
				rounds = append(rounds, runKiller(t, dir, 0, tc.where))
			}
			rounds = append(rounds, runKiller(t, dir, 0, "", tc.env...))
			seen := map[string]int{}
			for _, round := range rounds {
				for _, it := range round {
					seen[it]++
				}
			}
			for _, it := range items {
				if !strings.HasPrefix(it, "poison") && seen[it] == 0 {
					t.Fatalf("%s never delivered", it)
				}
			}
			dups, segs := checkKills(t, records, rounds, maxBlock, dlqdump.DefaultSegmentsInFlight)
			t.Logf("%d kills: %d delivered twice, of up to %d segments a kill (bound: one block of at most %d records per segment in flight per kill)", len(tc.killAt), dups, segs, maxBlock)
			quar := quarantinedPayloads(t, dir)
			if tc.where == "" && (len(quar) != 1 || quar[0] != "poison-first") {
				t.Fatalf("quarantine holds %q, want the poisoned record once", quar)
			}
			if n := len(segmentsIn(t, dir)); n != 0 {
				t.Fatalf("%d segments left", n)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*.part")); len(left) != 0 {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
}

// blockSizes returns the number of blocks in dir's segments and the largest
// number of records in one.
func blockSizes(t *testing.T, dir string) (blocks, maxRecords int) {
	t.Helper()
	for _, path := range segmentsIn(t, dir) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		r, err := segmentReader(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range r.Footer().Blocks {
			blocks++
			maxRecords = max(maxRecords, int(b.Count))
		}
		f.Close()
	}
	return blocks, maxRecords
}

package dlqdump_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func init() {
	children["restorer"] = restorerChild
}

// restorerChild restores DLQDUMP_DIR into a destination that prints every
// item it accepts, until no ready segment is left (or it is killed). With
// DLQDUMP_GATED set, its first delivery prints readyLine and waits for a
// byte on stdin: the parent opens the gate once every child holds a claim.
func restorerChild() int {
	dir := os.Getenv("DLQDUMP_DIR")
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	gated := os.Getenv("DLQDUMP_GATED") != ""
	dst := queueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		if gated {
			gated = false
			out.WriteString(readyLine + "\n")
			if err := out.Flush(); err != nil {
				return err
			}
			if _, err := io.ReadFull(os.Stdin, make([]byte, 1)); err != nil {
				return err
			}
		}
		out.WriteString(x.(string) + "\n")
		return out.Flush() // delivered: the parent counts it
	})
	rd := &fs.Reader{Directory: dir}
	c := &dlqdump.Config{
		Reader:  rd,
		Decoder: decoder.Fallthrough{AsString: true},
		Queue:   dst,
		Lease:   300 * time.Millisecond,
	}
	if gated {
		// Few enough that the other child finds segments to claim
		// while this one holds its first delivery (the store has 7).
		c.SegmentsInFlight = 2
	}
	r, err := dlqdump.NewRestorer(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		if err := r.Restore(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
		}
		left := 0
		for _, err := range rd.List(context.Background(), sink.AreaReady) {
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			left++
		}
		if left == 0 {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readyLine is what a gated restorer child prints before its first delivery.
const readyLine = "#ready"

// startRestorer starts a restorer child and collects the items it delivers.
func startRestorer(t *testing.T, dir string) (*exec.Cmd, <-chan []string) {
	t.Helper()
	cmd, lines, _, _ := startGatedRestorer(t, dir, false)
	return cmd, lines
}

// startGatedRestorer is startRestorer with, when gated, the child's first
// delivery held: ready is closed when it waits, and a write to gate lets it
// go on.
func startGatedRestorer(t *testing.T, dir string, gated bool) (*exec.Cmd, <-chan []string, <-chan struct{}, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=restorer", "DLQDUMP_DIR="+dir)
	var gate io.WriteCloser
	if gated {
		cmd.Env = append(cmd.Env, "DLQDUMP_GATED=1")
		var err error
		if gate, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	ready := make(chan struct{})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []string, 1)
	go func() {
		var got []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == readyLine {
				close(ready)
				continue
			}
			got = append(got, sc.Text())
		}
		_, _ = io.Copy(io.Discard, stdout)
		lines <- got
	}()
	return cmd, lines, ready, gate
}

// dumpForRestore dumps n records into many small segments of small blocks
// and returns the records and the largest number of records in a block.
func dumpForRestore(t *testing.T, dir string, n int) ([]string, int) {
	t.Helper()
	items := itemsN("rec", n)
	dumpItems(t, dir, dlqdump.Config{Capacity: 32 * dlqdump.Kilobyte, BlockSize: 2 * dlqdump.Kilobyte}, items)
	maxBlock := 0
	for _, path := range segmentsIn(t, dir) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		r, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range r.Footer().Blocks {
			maxBlock = max(maxBlock, int(b.Count))
		}
		f.Close()
	}
	return items, maxBlock
}

// Two restorer processes on one directory: no record is delivered twice while
// both are alive, and together they deliver everything. Each holds its first
// delivery until both have claimed a segment, so that both work whatever
// the machine's speed (one could restore everything before the other began).
func TestTwoRestorerProcesses(t *testing.T) {
	dir := t.TempDir()
	items, _ := dumpForRestore(t, dir, 20000)
	c1, l1, ready1, gate1 := startGatedRestorer(t, dir, true)
	c2, l2, ready2, gate2 := startGatedRestorer(t, dir, true)
	<-ready1
	<-ready2
	for _, g := range []io.WriteCloser{gate1, gate2} {
		if _, err := g.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		_ = g.Close()
	}
	got1, got2 := <-l1, <-l2
	if err := c1.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Wait(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, it := range append(got1, got2...) {
		seen[it]++
	}
	for _, it := range items {
		if seen[it] != 1 {
			t.Fatalf("item %s delivered %d times", it[:10], seen[it])
		}
	}
	if len(got1) == 0 || len(got2) == 0 {
		t.Fatalf("one restorer did all the work (%d and %d): the test did not exercise claims", len(got1), len(got2))
	}
	t.Logf("%d items: %d restored by one process, %d by the other, none twice", len(items), len(got1), len(got2))
}

// killRestorerAfter runs a restorer child on dir and SIGKILLs it once it
// has delivered n records (waiting for them, not for time), and returns what
// it delivered (at least n, unless it ran out first) and whether it was
// killed.
func killRestorerAfter(t *testing.T, dir string, n int) ([]string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=restorer", "DLQDUMP_DIR="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []string
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		got = append(got, sc.Text())
		if len(got) == n {
			killed = cmd.Process.Kill() == nil
		}
	}
	_ = cmd.Wait()
	return got, killed
}

// A restorer child SIGKILLed after a random number of deliveries and
// restarted each time: every record is delivered at least once, and what
// each kill delivers again is at most one block of each segment in flight.
func TestRestorerCrashLoop(t *testing.T) {
	dir := t.TempDir()
	items, maxBlock := dumpForRestore(t, dir, 30000)
	records := readDir(t, dir)
	rng := rand.New(rand.NewPCG(7, 8))
	seen := map[string]int{}
	var delivered [][]string // by round
	const rounds = 24
	kills := 0
	for range rounds {
		got, killed := killRestorerAfter(t, dir, 1+rng.IntN(2*len(items)/rounds))
		if killed {
			kills++
		}
		delivered = append(delivered, got)
	}
	// A last restorer runs to the end.
	cmd, lines := startRestorer(t, dir)
	delivered = append(delivered, <-lines)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, round := range delivered {
		for _, it := range round {
			seen[it]++
		}
	}
	for _, it := range items {
		if seen[it] == 0 {
			t.Fatalf("item %s was never delivered", it)
		}
	}
	if len(seen) != len(items) {
		t.Fatalf("%d distinct items delivered, %d dumped", len(seen), len(items))
	}
	dups, segs := checkKills(t, records, delivered, maxBlock, dlqdump.DefaultSegmentsInFlight)
	t.Logf("%d kills: %d items, %d delivered twice, of up to %d segments a kill (bound: one block of %d records per segment in flight per kill)", kills, len(items), dups, segs, maxBlock)
	if n := len(segmentsIn(t, dir)); n != 0 {
		t.Fatalf("%d segments left", n)
	}
}

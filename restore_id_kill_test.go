package dlqdump_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
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
	children["id-killer"] = idKillerChild
}

// idKillerChild restores DLQDUMP_DIR with DeliverEnvelope into a
// destination that prints "ID PAYLOAD" for every record it accepts and
// SIGKILLs the process right after the DLQDUMP_KILL_AT-th (0: never).
func idKillerChild() int {
	killAt, _ := strconv.Atoi(os.Getenv("DLQDUMP_KILL_AT"))
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	n := 0
	dst := queueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		env := x.(*dlqdump.Envelope)
		fmt.Fprintf(out, "%s %s\n", env.Headers[dlqdump.HeaderRecordID], env.Item)
		if err := out.Flush(); err != nil {
			return err
		}
		if n++; n == killAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader:          &fs.Reader{Directory: os.Getenv("DLQDUMP_DIR")},
		Decoder:         poisonDecoder{},
		Queue:           dst,
		DeliverEnvelope: true,
		Lease:           150 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
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

// runIDKiller runs idKillerChild and returns the lines it printed.
func runIDKiller(t *testing.T, dir string, killAt int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=id-killer", "DLQDUMP_DIR="+dir, "DLQDUMP_KILL_AT="+strconv.Itoa(killAt))
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	ee, _ := err.(*exec.ExitError)
	ws, _ := func() (syscall.WaitStatus, bool) {
		if ee == nil {
			return 0, false
		}
		w, ok := ee.Sys().(syscall.WaitStatus)
		return w, ok
	}()
	if killAt > 0 && !(ee != nil && ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		t.Fatalf("the restorer was to be killed at its %d-th delivery: %v", killAt, err)
	}
	if killAt == 0 && err != nil {
		t.Fatalf("restorer: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestCrashRedeliverySameID: a restorer killed in the middle of a block
// delivers that block's records again after the restart, each with the ID
// (Envelope.Headers[HeaderRecordID]) it had the first time; IDs are unique;
// and the README's Dedup destination, fed everything delivered across the
// crashes, passes each record on exactly once.
func TestCrashRedeliverySameID(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 8 * dlqdump.Kilobyte, Writer: &fs.Writer{Directory: dir}})
	items := itemsN("d", 20000)
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	_, maxBlock := blockSizes(t, dir)
	var lines []string
	for _, k := range []int{3001, 7777} {
		lines = append(lines, runIDKiller(t, dir, k)...)
	}
	lines = append(lines, runIDKiller(t, dir, 0)...)

	idOf := map[string]string{}   // payload -> ID
	itemOf := map[string]string{} // ID -> payload
	times := map[string]int{}
	var delivered []*dlqdump.Envelope
	for _, l := range lines {
		id, item, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("line %q", l)
		}
		if _, err := dlqdump.ParseRecordID(id); err != nil {
			t.Fatalf("delivered with ID %q: %v", id, err)
		}
		if old, seen := idOf[item]; seen && old != id {
			t.Fatalf("%s delivered with ID %s, again with %s", item, old, id)
		}
		if old, seen := itemOf[id]; seen && old != item {
			t.Fatalf("ID %s delivered for %s and for %s", id, old, item)
		}
		idOf[item], itemOf[id] = id, item
		times[item]++
		delivered = append(delivered, &dlqdump.Envelope{Item: item, Headers: dlqdump.Headers{dlqdump.HeaderRecordID: id}})
	}
	dups := 0
	for _, it := range items {
		if times[it] == 0 {
			t.Fatalf("%s never delivered", it)
		}
		dups += times[it] - 1
	}
	t.Logf("2 kills: %d records delivered again (bound %d), each with its first ID", dups, 2*maxBlock)
	if dups == 0 || dups > 2*maxBlock {
		t.Fatalf("%d records delivered twice: want some (a kill in the middle of a block), at most one block per kill (%d)", dups, 2*maxBlock)
	}

	// The README's destination drops them.
	passed := map[string]int{}
	d := &Dedup{Window: 4096, Next: func(x any) error {
		passed[x.(*dlqdump.Envelope).Item.(string)]++
		return nil
	}}
	for _, env := range delivered {
		if err := d.Enqueue(env); err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range items {
		if passed[it] != 1 {
			t.Fatalf("Dedup passed %s on %d times, want once", it, passed[it])
		}
	}
}

// README:begin dedup

// Dedup is a destination that drops the records it has seen, by the ID
// every record a Restorer delivers carries (Config.DeliverEnvelope, or a
// HeaderCarrier). A crash re-delivers at most one block per segment in
// flight, right after the restart: remembering the last Window IDs (more
// than a block's records times Config.Concurrency segments) drops them
// all. A destination that must survive its own restarts keeps the IDs
// where it keeps its effects (a unique key, written in the same
// transaction).
type Dedup struct {
	Window int               // IDs remembered
	Next   func(x any) error // the real destination

	mu   sync.Mutex
	seen map[string]bool
	ring []string
	at   int
}

// Enqueue passes x on unless its ID was seen lately.
func (d *Dedup) Enqueue(x any) error {
	id := x.(*dlqdump.Envelope).Headers[dlqdump.HeaderRecordID]
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[id] {
		return nil // delivered before the crash: accepted, not done twice
	}
	if err := d.Next(x); err != nil {
		return err // refused: not remembered, so a retry passes it on
	}
	if d.seen == nil {
		d.seen, d.ring = map[string]bool{}, make([]string, d.Window)
	}
	delete(d.seen, d.ring[d.at])
	d.ring[d.at], d.seen[id] = id, true
	d.at = (d.at + 1) % d.Window
	return nil
}

// README:end dedup

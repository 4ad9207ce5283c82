package dlqdump_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

func init() {
	children["durable-dumper"] = durableDumperChild
}

// durableDumperChild dumps records from several goroutines in Durable mode
// and prints the id of every record whose Enqueue returned nil, until killed.
func durableDumperChild() int {
	dir, round := os.Getenv("DLQDUMP_DIR"), os.Getenv("DLQDUMP_ROUND")
	q, err := dlqdump.NewQueue(&dlqdump.Config{
		Writer:         &fs.Writer{Directory: dir},
		Capacity:       64 * dlqdump.Kilobyte,
		BlockSize:      8 * dlqdump.Kilobyte,
		Durable:        true,
		EnqueueTimeout: time.Minute,
		FlushInterval:  50 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%s-g%d-%06d", round, g, i)
				if err := q.Enqueue(id + "|" + string(make([]byte, i%200))); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				mu.Lock()
				out.WriteString(id + "\n")
				out.Flush() // acknowledged: the parent may hold us to it
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return 0
}

// A child dumping in Durable mode is SIGKILLed at random moments, including
// while it recovers the previous round's open segment: every record whose
// Enqueue returned nil is then in a published segment, exactly once, and no
// temporary file is left after recovery. A round kills its child once it has
// acknowledged a random number of records (zero: as soon as it starts), so a
// loaded machine slows the test down but does not empty it.
func TestDurableCrashLoop(t *testing.T) {
	dir := t.TempDir()
	const rounds = 24
	acked := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	var want int
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=durable-dumper", "DLQDUMP_DIR="+dir, "DLQDUMP_ROUND="+strconv.Itoa(round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		target := 0
		if round%4 != 0 {
			target = 1 + rng.IntN(400)
		}
		want += target
		reached := make(chan struct{})
		lines := make(chan []string, 1)
		go func() {
			var ids []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				ids = append(ids, sc.Text())
				if len(ids) == target {
					close(reached)
				}
			}
			lines <- ids
		}()
		if target > 0 {
			select {
			case <-reached:
			case ids := <-lines:
				t.Fatalf("round %d: the child ended after acknowledging %d records", round, len(ids))
			case <-time.After(2 * time.Minute):
				t.Fatalf("round %d: the child acknowledged fewer than %d records in 2 minutes", round, target)
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		ids := <-lines
		_ = cmd.Wait()
		for _, id := range ids {
			acked[id] = true
		}
	}
	if len(acked) < want {
		t.Fatalf("only %d records acknowledged over %d rounds, want at least %d", len(acked), rounds, want)
	}
	// Recover what the last child left.
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, dir); len(l) > 0 {
		t.Fatalf("files left after recovery: %v", l)
	}
	seen := map[string]int{}
	for _, r := range readDir(t, dir) {
		id, _, _ := strings.Cut(r.Payload, "|")
		seen[id]++
	}
	var lost int
	for id := range acked {
		if seen[id] == 0 {
			lost++
			if lost < 5 {
				t.Errorf("acknowledged record %s is not in the dump", id)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("record %s dumped %d times", id, n)
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged records lost", lost, len(acked))
	}
	t.Logf("%d rounds: %d records acknowledged, %d in the dump, 0 lost", rounds, len(acked), len(seen))
}

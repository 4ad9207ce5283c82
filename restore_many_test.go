package dlqdump_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func init() {
	children["drainer"] = drainerChild
}

// storeSpec says where a child process finds a store: a directory, or an S3
// server and prefix.
type storeSpec struct {
	Dir    string         `json:"dir,omitempty"`
	S3     *s3test.Server `json:"s3,omitempty"`
	Prefix string         `json:"prefix,omitempty"`
}

func (s storeSpec) reader() sink.Reader {
	if s.S3 != nil {
		return &s3.Reader{Client: s.S3.Client(), Bucket: s.S3.Bucket, Prefix: s.Prefix}
	}
	return &fs.Reader{Directory: s.Dir}
}

// drainerChild restores the store in DLQDUMP_STORE with the owner "svc"
// until nothing is left and no other restorer holds a segment, printing
// each item it delivers.
func drainerChild() int {
	var spec storeSpec
	if err := json.Unmarshal([]byte(os.Getenv("DLQDUMP_STORE")), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	dst := queueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := out.WriteString(x.(string) + "\n")
		return err
	})
	rd := spec.reader()
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Queue: dst, Owner: "svc", Lease: 2 * time.Second,
		Decoder: poisonDecoder{}, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer out.Flush()
	for {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
			return 1
		}
		if rep.Claimed == 0 && r.Stats().Ready == 0 {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// seedSegments writes n small segments of per records each through the
// store's Reader.Create and returns the items.
func seedSegments(t *testing.T, rd sink.Reader, n, per int) []string {
	t.Helper()
	var items []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	base := time.Now().Add(-time.Hour)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				created := base.Add(time.Duration(i) * time.Millisecond)
				id := segment.NewID(created)
				name := segment.FileName(created, id)
				sw, err := rd.Create(t.Context(), sink.AreaReady, name)
				if err != nil {
					t.Error(err)
					return
				}
				w, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				var mine []string
				for j := range per {
					it := fmt.Sprintf("s%05d-r%03d", i, j)
					if err := w.Add(created, nil, []byte(it)); err != nil {
						t.Error(err)
						return
					}
					mine = append(mine, it)
				}
				if err := w.Close(); err != nil {
					t.Error(err)
					return
				}
				if err := sw.Commit(t.Context()); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				items = append(items, mine...)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return items
}

// drainWith starts procs drainer processes on spec and returns what each
// delivered.
func drainWith(t *testing.T, spec storeSpec, procs int) [][]string {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([][]string, procs)
	var wg sync.WaitGroup
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=drainer", "DLQDUMP_STORE="+string(b))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				outs[p] = append(outs[p], sc.Text())
			}
			_, _ = io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil {
				t.Errorf("drainer %d: %v", p, err)
			}
		})
	}
	wg.Wait()
	return outs
}

// manySegments is how many segments TestRestorersShareAStore drains:
// DLQDUMP_MANY_SEGMENTS, or a sample that keeps the test short.
func manySegments(sample int) int {
	if n, err := strconv.Atoi(os.Getenv("DLQDUMP_MANY_SEGMENTS")); err == nil && n > 0 {
		return n
	}
	return sample
}

// Several restorer processes with the same Owner drain one store: every
// record is delivered exactly once while all of them live.
// DLQDUMP_MANY_SEGMENTS=10000 runs the full size.
func TestRestorersShareAStore(t *testing.T) {
	const procs, per = 4, 5
	for _, store := range []string{"dir", "versitygw"} {
		t.Run(store, func(t *testing.T) {
			spec := storeSpec{Dir: t.TempDir()}
			n := manySegments(1000)
			if store == "versitygw" {
				srv, stop, err := s3test.Versity(nil)
				if err != nil {
					t.Skip(err)
				}
				t.Cleanup(stop)
				spec = storeSpec{S3: srv, Prefix: s3test.UniquePrefix("many")}
				n = manySegments(300)
			}
			items := seedSegments(t, spec.reader(), n, per)
			start := time.Now()
			outs := drainWith(t, spec, procs)
			took := time.Since(start)
			seen := map[string]int{}
			busy := 0
			for _, out := range outs {
				if len(out) > 0 {
					busy++
				}
				for _, it := range out {
					seen[it]++
				}
			}
			for _, it := range items {
				if seen[it] != 1 {
					t.Fatalf("%s delivered %d times", it, seen[it])
				}
			}
			if len(seen) != len(items) {
				t.Fatalf("%d distinct items delivered, %d dumped", len(seen), len(items))
			}
			t.Logf("%s: %d restorers (same owner) drained %d segments, %d records in %s: %.0f records/s, %.0f segments/s; %d of them got work; 0 lost, 0 twice",
				store, procs, n, len(items), took.Round(time.Millisecond), float64(len(items))/took.Seconds(), float64(n)/took.Seconds(), busy)
		})
	}
}

// Package drainers runs several restorer processes with the same Owner on
// one store (a directory or an S3 prefix) until they have drained it, and
// checks that every record was delivered exactly once while all of them
// lived. TestRestorersShareAStore runs it on a sample and
// cmd/dlqdump-reliability on 10,000 segments.
//
// The restorer processes are this program started again: its main (or
// TestMain) must call ChildMain when IsChild reports true.
package drainers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Owner is the Owner every restorer of a run shares, as replicas of one
// service would.
const Owner = "svc"

// Store says where the segments are: a directory, or an S3 server and
// prefix. It is passed to the restorer processes as JSON.
type Store struct {
	Dir    string         `json:"dir,omitempty"`
	S3     *s3test.Server `json:"s3,omitempty"`
	Prefix string         `json:"prefix,omitempty"`
}

// Reader returns the store's sink.Reader.
func (s Store) Reader() sink.Reader {
	if s.S3 != nil {
		return &s3.Reader{Client: s.S3.Client(), Bucket: s.S3.Bucket, Prefix: s.Prefix}
	}
	return &fs.Reader{Directory: s.Dir}
}

// EnvChild holds the Store, as JSON, in a restorer process.
const EnvChild = "DLQDUMP_DRAINER_STORE"

// IsChild reports whether this process was started as a restorer by Drain.
func IsChild() bool { return os.Getenv(EnvChild) != "" }

// ChildMain restores the store in EnvChild with the Owner "svc" until
// nothing is left and no other restorer holds a segment, printing each item
// it delivers on a line of its own. It returns the exit status.
func ChildMain() int {
	var st Store
	if err := json.Unmarshal([]byte(os.Getenv(EnvChild)), &st); err != nil {
		fmt.Fprintln(os.Stderr, "drainer:", err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var mu sync.Mutex
	dst := queueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := out.WriteString(x.(string) + "\n")
		return err
	})
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st.Reader(), Queue: dst, Owner: Owner, Lease: 2 * time.Second,
		Decoder: stringDecoder{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "drainer:", err)
		return 1
	}
	defer r.Close()
	for {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "drainer: restore:", err)
			return 1
		}
		if rep.Claimed == 0 && r.Stats().Ready == 0 {
			return 0
		}
		// Segments are held by the others: look again soon (their
		// claims end when they finish, or are taken over after Lease).
		time.Sleep(20 * time.Millisecond)
	}
}

type queueFunc func(any) error

func (f queueFunc) Enqueue(x any) error { return f(x) }

type stringDecoder struct{}

func (stringDecoder) Decode(b []byte) (any, error) { return string(b), nil }

// Seed writes n segments of per records each through rd.Create, 8 at a time,
// and returns the records' items ("sNNNNN-rNNN").
func Seed(ctx context.Context, rd sink.Reader, n, per int) ([]string, error) {
	var (
		items []string
		mu    sync.Mutex
		wg    sync.WaitGroup
		errs  = make(chan error, 8)
		next  = make(chan int)
	)
	base := time.Now().Add(-time.Hour)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				mine, err := seedOne(ctx, rd, base.Add(time.Duration(i)*time.Millisecond), i, per)
				if err != nil {
					errs <- err
					for range next { // let the feeder finish
					}
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
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("drainers: seed %d segments: %w", n, err)
	}
	return items, nil
}

// seedOne writes segment i.
func seedOne(ctx context.Context, rd sink.Reader, created time.Time, i, per int) ([]string, error) {
	id := segment.NewID(created)
	name := segment.FileName(created, id)
	sw, err := rd.Create(ctx, sink.AreaReady, name)
	if err != nil {
		return nil, err
	}
	w, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, nil)
	if err != nil {
		_ = sw.Abort()
		return nil, err
	}
	var mine []string
	for j := range per {
		it := fmt.Sprintf("s%05d-r%03d", i, j)
		if err := w.Add(created, nil, []byte(it)); err != nil {
			_ = sw.Abort()
			return nil, err
		}
		mine = append(mine, it)
	}
	if err := w.Close(); err != nil {
		_ = sw.Abort()
		return nil, err
	}
	if err := sw.Commit(ctx); err != nil {
		return nil, err
	}
	return mine, nil
}

// Drain starts procs restorer processes on st, each the command child
// returns (with EnvChild added to its environment), and returns what each
// delivered, once all have exited.
func Drain(st Store, procs int, child func() *exec.Cmd) ([][]string, error) {
	spec, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	outs := make([][]string, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for p := range procs {
		cmd := child()
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, EnvChild+"="+string(spec))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		childproc.DieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("drainers: start restorer %d: %w", p, err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				outs[p] = append(outs[p], sc.Text())
			}
			_, _ = io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil {
				errs[p] = fmt.Errorf("drainers: restorer %d: %w", p, err)
			}
		})
	}
	wg.Wait()
	return outs, errors.Join(errs...)
}

// Result is what a run of restorers did.
type Result struct {
	// Segments and Records were dumped; Procs restorers drained them, Busy
	// of which delivered something.
	Segments, Records, Procs, Busy int
	// Lost counts the records never delivered, Twice those delivered more
	// than once, Foreign the deliveries of items never dumped.
	Lost, Twice, Foreign int
	// Took is how long draining took, from the restorers' start to the
	// last one's exit.
	Took time.Duration
}

// PerSecond returns the records delivered per second.
func (r *Result) PerSecond() float64 { return float64(r.Records) / r.Took.Seconds() }

// OK reports whether every record was delivered exactly once.
func (r *Result) OK() bool { return r.Lost == 0 && r.Twice == 0 && r.Foreign == 0 }

// String summarizes the run.
func (r *Result) String() string {
	return fmt.Sprintf("%d restorers (same Owner) drained %d segments, %d records in %s: %.0f records/s, %.0f segments/s; %d of them got work; %d lost, %d delivered twice",
		r.Procs, r.Segments, r.Records, r.Took.Round(time.Millisecond), r.PerSecond(), float64(r.Segments)/r.Took.Seconds(), r.Busy, r.Lost, r.Twice)
}

// Run seeds n segments of per records into st, drains them with procs
// restorer processes and checks what they delivered.
func Run(ctx context.Context, st Store, n, per, procs int, child func() *exec.Cmd) (*Result, error) {
	return RunSeeded(ctx, st.Reader(), st, n, per, procs, child, nil)
}

// RunSeeded is Run seeding through seed (st's store, reached another way:
// without a proxy's latency, say), calling draining, when not nil, once
// the segments are there, just before the restorers start.
func RunSeeded(ctx context.Context, seed sink.Reader, st Store, n, per, procs int, child func() *exec.Cmd, draining func()) (*Result, error) {
	items, err := Seed(ctx, seed, n, per)
	if err != nil {
		return nil, err
	}
	if draining != nil {
		draining()
	}
	start := time.Now()
	outs, err := Drain(st, procs, child)
	res := &Result{Segments: n, Records: len(items), Procs: procs, Took: time.Since(start)}
	if err != nil {
		return res, err
	}
	seen := make(map[string]int, len(items))
	for _, out := range outs {
		if len(out) > 0 {
			res.Busy++
		}
		for _, it := range out {
			seen[it]++
		}
	}
	dumped := make(map[string]bool, len(items))
	for _, it := range items {
		dumped[it] = true
		switch n := seen[it]; {
		case n == 0:
			res.Lost++
		case n > 1:
			res.Twice++
		}
	}
	for it := range seen {
		if !dumped[it] {
			res.Foreign++
		}
	}
	return res, nil
}

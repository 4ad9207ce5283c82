package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Child processes: the parent SIGKILLs them at random instants.
func runChild(mode string) int {
	switch mode {
	case "dump-durable", "dump-buffered":
		return dumpChild(mode == "dump-durable")
	case "restore":
		return restoreChild()
	}
	fmt.Fprintln(os.Stderr, "unknown child", mode)
	return 2
}

// Record size and segment geometry of the crash loops.
const (
	childPayload   = 200
	childBlockSize = 8 * dlqdump.Kilobyte
	childMaxPend   = 256 * dlqdump.Kilobyte
	childFlush     = 200 * time.Millisecond
)

// dumpChild dumps from 4 goroutines and prints the id of every record whose
// Enqueue returned nil.
func dumpChild(durable bool) int {
	dir, round := os.Getenv("DLQDUMP_DIR"), os.Getenv("DLQDUMP_ROUND")
	q, err := dlqdump.NewQueue(&dlqdump.Config{
		Writer:         &fs.Writer{Directory: dir},
		Capacity:       256 * dlqdump.Kilobyte,
		BlockSize:      childBlockSize,
		MaxPending:     childMaxPend,
		Durable:        durable,
		EnqueueTimeout: time.Minute,
		FlushInterval:  childFlush,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	pad := strings.Repeat("x", childPayload)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%s-g%d-%07d", round, g, i)
				if err := q.Enqueue(id + "|" + pad[:childPayload-len(id)]); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				mu.Lock()
				out.WriteString(id + "\n")
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return 0
}

// runRounds starts the child mode rounds times, SIGKILLing it after a random
// delay, and returns every line the children printed.
func runRounds(o *options, mode, dir string, rng *rand.Rand, minMs, maxMs int) (lines []string, kills int) {
	for round := range o.rounds {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "DLQDUMP_RELIABILITY_CHILD="+mode, "DLQDUMP_DIR="+dir, "DLQDUMP_ROUND="+strconv.Itoa(round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			panic(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		got := make(chan []string)
		go func() {
			var l []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				l = append(l, sc.Text())
			}
			_, _ = io.Copy(io.Discard, stdout)
			got <- l
		}()
		time.Sleep(time.Duration(minMs+rng.IntN(maxMs-minMs)) * time.Millisecond)
		if cmd.Process.Kill() == nil {
			kills++
		}
		lines = append(lines, <-got...)
		_ = cmd.Wait()
	}
	return lines, kills
}

// readIDs returns how many times each record id is in the ready segments
// of dir, after recovering what the last child left open.
func readIDs(dir string) (map[string]int, error) {
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte})
	if err != nil {
		return nil, err
	}
	if err := q.Close(); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
	for _, p := range paths {
		if err := eachRecord(p, func(rec *segment.Record) {
			id, _, _ := strings.Cut(string(rec.Payload), "|")
			seen[id]++
		}); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

func eachRecord(path string, fn func(*segment.Record)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	r, err := segment.NewReader(f, st.Size(), &segment.ReaderOptions{Name: filepath.Base(path)})
	if err != nil {
		return err
	}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		fn(&rec)
	}
}

func leftoverFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), segment.Ext)) {
			out = append(out, e.Name())
		}
	}
	return out
}

func crashDump(o *options) []result {
	var rs []result
	for _, durable := range []bool{true, false} {
		mode, name := "dump-buffered", "dump crash loop, buffered"
		if durable {
			mode, name = "dump-durable", "dump crash loop, Durable"
		}
		dir, _ := os.MkdirTemp("", "dlqdump-rel-")
		rng := rand.New(rand.NewPCG(11, uint64(len(mode))))
		acked, kills := runRounds(o, mode, dir, rng, 20, 400)
		seen, err := readIDs(dir)
		if err != nil {
			rs = append(rs, result{section: name, figures: err.Error(), bound: "readable"})
			continue
		}
		var lost, dups int
		for _, id := range acked {
			if seen[id] == 0 {
				lost++
			}
		}
		for _, n := range seen {
			dups += max(n-1, 0)
		}
		left := leftoverFiles(dir)
		os.RemoveAll(dir)
		r := result{section: name,
			figures: fmt.Sprintf("%d kills, %d acknowledged, %d lost, %d duplicated, %d files left", kills, len(acked), lost, dups, len(left))}
		if !durable {
			// Buffered records in memory at a kill are the documented
			// window, not a loss the check is about: say it so.
			r.figures = fmt.Sprintf("%d kills, %d acknowledged, %d still in memory at the kills (not stored: the buffered window), %d duplicated, %d files left", kills, len(acked), lost, dups, len(left))
		}
		if durable {
			r.bound = "0 lost, 0 duplicated, 0 left"
			r.ok = lost == 0 && dups == 0 && len(left) == 0
		} else {
			// The documented window: what was not yet handed to the OS, at
			// most MaxPending bytes per crash.
			perKill := int(childMaxPend) / childPayload
			r.bound = fmt.Sprintf("<= %d in memory (MaxPending %s = %d records per kill), 0 duplicated", perKill*kills, childMaxPend, perKill)
			r.ok = lost <= perKill*kills && dups == 0 && len(left) == 0
			r.note = fmt.Sprintf("%.1f records in memory per kill on average; Durable: 0", float64(lost)/float64(max(kills, 1)))
		}
		rs = append(rs, r)
	}
	return rs
}

// restoreChild restores DLQDUMP_DIR into a destination that prints every
// item, until nothing is left.
func restoreChild() int {
	dir := os.Getenv("DLQDUMP_DIR")
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	dst := enqueueFunc(func(x any) error {
		mu.Lock()
		defer mu.Unlock()
		id, _, _ := strings.Cut(x.(string), "|")
		out.WriteString(id + "\n")
		return out.Flush()
	})
	rd := &fs.Reader{Directory: dir}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: dst, Lease: 300 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		if err := r.Restore(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
		}
		n := 0
		for _, err := range rd.List(context.Background(), sink.AreaReady) {
			if err != nil {
				return 1
			}
			n++
		}
		if n == 0 {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type enqueueFunc func(any) error

func (f enqueueFunc) Enqueue(x any) error { return f(x) }

func crashRestore(o *options) []result {
	dir, _ := os.MkdirTemp("", "dlqdump-rel-")
	defer os.RemoveAll(dir)
	const n = 100_000
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 64 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte})
	if err != nil {
		return []result{{section: "restore crash loop", figures: err.Error()}}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("rec-%07d", i)
		if err := q.Enqueue(ids[i] + "|" + strings.Repeat("y", i%100)); err != nil {
			return []result{{section: "restore crash loop", figures: err.Error()}}
		}
	}
	if err := q.Close(); err != nil {
		return []result{{section: "restore crash loop", figures: err.Error()}}
	}
	maxBlock := 0
	paths, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
	inFlight := min(len(paths), dlqdump.DefaultSegmentsInFlight) // the restorer's default
	for _, p := range paths {
		f, _ := os.Open(p)
		st, _ := f.Stat()
		if r, err := segment.NewReader(f, st.Size(), nil); err == nil && r.Footer() != nil {
			for _, b := range r.Footer().Blocks {
				maxBlock = max(maxBlock, int(b.Count))
			}
		}
		f.Close()
	}
	rng := rand.New(rand.NewPCG(21, 22))
	lines, kills := runRounds(o, "restore", dir, rng, 50, 400)
	// A last restorer runs to the end.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DLQDUMP_RELIABILITY_CHILD=restore", "DLQDUMP_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return []result{{section: "restore crash loop", figures: "final restorer: " + err.Error()}}
	}
	lines = append(lines, strings.Fields(string(out))...)
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	var lost, dups int
	for _, id := range ids {
		if seen[id] == 0 {
			lost++
		}
		dups += max(seen[id]-1, 0)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
	bound := kills * inFlight * maxBlock
	return []result{{
		section: "restore crash loop",
		figures: fmt.Sprintf("%d kills, %d records, %d lost, %d delivered twice, %d segments left", kills, n, lost, dups, len(left)),
		bound:   fmt.Sprintf("0 lost, <= %d twice (one block of <= %d records per segment in flight, %d, per kill), 0 left", bound, maxBlock, inFlight),
		ok:      lost == 0 && dups <= bound && len(left) == 0,
		note:    fmt.Sprintf("%.1f duplicates per kill on average", float64(dups)/float64(max(kills, 1))),
	}}
}

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// restoreDesigns measures, side by side in one process, the Restorer (fs,
// decoder.Fallthrough, a checkpoint after every block) against a bare
// pipeline of the same shape (GOMAXPROCS goroutines decode zstd blocks into
// new buffers, one goroutine hands their records out in order as sub-slices,
// one Enqueue each), with and without an fs claim record written after every
// block as the Restorer's checkpoint is, all as ratios to one-core DecodeAll
// of the same blocks in the same round. The pipeline has no lease, fencing,
// accounting or side segments.
func restoreDesigns(base string) {
	segs := filepath.Join(base, "segments")
	check(os.MkdirAll(segs, 0o755))
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: segs}, Capacity: 64 * dlqdump.Megabyte, EnqueueTimeout: time.Minute})
	check(err)
	for _, r := range records {
		check(q.Enqueue(r))
	}
	check(q.Close())
	blocks, raws := zstdBlocks()
	names := []string{"restorer", "pipeline+checkpoint", "pipeline"}
	if *only != "" {
		names = slices.DeleteFunc(names, func(s string) bool { return !slices.Contains(strings.Split(*only, ","), s) })
	}
	ratio := map[string][]float64{}
	for round := range *rounds {
		ceiling := decodeCeiling(blocks, raws)
		for i := range names {
			name := names[(round+i)%len(names)]
			runtime.GC()
			var rate float64
			switch name {
			case "restorer":
				rate = restorerRun(base, segs)
			case "pipeline+checkpoint":
				rate = pipelineRun(base, blocks, raws, true)
			case "pipeline":
				rate = pipelineRun(base, blocks, raws, false)
			}
			ratio[name] = append(ratio[name], rate/ceiling)
			fmt.Fprintf(os.Stderr, "round %d %-20s %9.0f items/s, %.2f of one-core DecodeAll (%.0f items/s)\n", round, name, rate, rate/ceiling, ceiling)
		}
	}
	fmt.Printf("restore: %d records of ~%d B, GOMAXPROCS %d, median of %d rounds\n", *n, *size, runtime.GOMAXPROCS(0), *rounds)
	fmt.Printf("%-20s %24s\n", "system", "of one-core DecodeAll")
	for _, name := range names {
		fmt.Printf("%-20s %24.2f\n", name, median(ratio[name]))
	}
}

// zstdBlocks returns the records framed (length, payload) in 256 KiB blocks,
// each compressed as the Queue's default codec does, and their raw sizes.
func zstdBlocks() (blocks [][]byte, raws []int) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
	check(err)
	var raw []byte
	flush := func() {
		blocks = append(blocks, enc.EncodeAll(raw, nil))
		raws = append(raws, len(raw))
		raw = raw[:0]
	}
	for _, r := range records {
		p := r.([]byte)
		raw = binary.AppendUvarint(raw, uint64(len(p)))
		raw = append(raw, p...)
		if len(raw) >= blockSize {
			flush()
		}
	}
	if len(raw) > 0 {
		flush()
	}
	return blocks, raws
}

// decodeCeiling returns the items/s of one goroutine decoding every block
// into one reused buffer.
func decodeCeiling(blocks [][]byte, raws []int) float64 {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	check(err)
	defer dec.Close()
	buf := make([]byte, 0, blockSize+blockSize/8)
	start := time.Now()
	for i, b := range blocks {
		out, err := dec.DecodeAll(b, buf[:0])
		check(err)
		if len(out) != raws[i] {
			fail(fmt.Errorf("block %d decoded to %d bytes, want %d", i, len(out), raws[i]))
		}
	}
	return float64(*n) / time.Since(start).Seconds()
}

// counter is a destination that accepts everything.
type counter struct{ n atomic.Int64 }

func (c *counter) Enqueue(any) error { c.n.Add(1); return nil }

// restorerRun restores a copy (hard links) of the segments.
func restorerRun(base, segs string) float64 {
	dir := filepath.Join(base, "restore")
	check(os.RemoveAll(dir))
	check(os.MkdirAll(dir, 0o755))
	entries, err := os.ReadDir(segs)
	check(err)
	for _, e := range entries {
		if !e.IsDir() {
			check(os.Link(filepath.Join(segs, e.Name()), filepath.Join(dir, e.Name())))
		}
	}
	dst := &counter{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dst})
	check(err)
	defer r.Close()
	start := time.Now()
	if _, err := r.Run(context.Background(), dlqdump.RunOptions{}); err != nil {
		fail(err)
	}
	d := time.Since(start)
	if got := dst.n.Load(); got != int64(*n) {
		fail(fmt.Errorf("the Restorer delivered %d records, want %d", got, *n))
	}
	return float64(*n) / d.Seconds()
}

// pipelineRun runs the bare pipeline; with checkpoint it rewrites an fs claim
// record (fs.Reader.WriteRecord, as the Restorer's checkpoint does) after
// every block but the last.
func pipelineRun(base string, blocks [][]byte, raws []int, checkpoint bool) float64 {
	type job struct {
		i   int
		out chan []byte
	}
	jobs := make(chan job, 8)
	order := make(chan chan []byte, 8)
	for range runtime.GOMAXPROCS(0) {
		go func() {
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			check(err)
			defer dec.Close()
			for j := range jobs {
				out, err := dec.DecodeAll(blocks[j.i], make([]byte, 0, raws[j.i]))
				check(err)
				j.out <- out
			}
		}()
	}
	go func() {
		for i := range blocks {
			c := make(chan []byte, 1)
			order <- c
			jobs <- job{i, c}
		}
		close(order)
		close(jobs)
	}()
	var (
		rd      *fs.Reader
		name    string
		version string
		state   = bytes.Repeat([]byte("p"), 120)
	)
	if checkpoint {
		dir := filepath.Join(base, "claims")
		check(os.RemoveAll(dir))
		check(os.MkdirAll(dir, 0o755))
		rd = &fs.Reader{Directory: dir}
		now := time.Now()
		name = segment.FileName(now, segment.NewID(now)) // claim records are named after segments
		var err error
		version, err = rd.WriteRecord(context.Background(), name, state, "")
		check(err)
	}
	dst := &counter{}
	start := time.Now()
	delivered := 0
	for c := range order {
		if checkpoint && delivered > 0 {
			state[0]++
			var err error
			version, err = rd.WriteRecord(context.Background(), name, state, version)
			check(err)
		}
		b := <-c
		for len(b) > 0 {
			l, k := binary.Uvarint(b)
			end := k + int(l)
			check(dst.Enqueue(b[k:end:end]))
			b = b[end:]
			delivered++
		}
	}
	d := time.Since(start)
	if delivered != *n {
		fail(fmt.Errorf("the pipeline delivered %d records, want %d", delivered, *n))
	}
	return float64(*n) / d.Seconds()
}

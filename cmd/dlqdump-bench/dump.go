package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// benchDump measures sustained dump throughput into the fs sink (buffered and
// Durable), bytes on disk, Enqueue latency under partial load, peak RSS, and
// the plain zstd EncodeAll ceiling on the same data.
func benchDump(w io.Writer, o *options, pool [][]byte) error {
	codec, err := codecOf(o.codec)
	if err != nil {
		return err
	}
	var payload int64
	for i := range o.n {
		payload += int64(len(pool[i%len(pool)]))
	}
	fmt.Fprintf(w, "dump\titems/s\tMB/s\tof ceiling\tnotes\t\n")

	// Sustained, buffered.
	dir := filepath.Join(o.dir, "dump")
	resetPeakRSS()
	d, err := sustained(dir, codec, o, pool, false, runtime.GOMAXPROCS(0))
	if err != nil {
		return err
	}
	rss := peakRSS()
	disk, segs, err := dirSize(dir)
	if err != nil {
		return err
	}
	rate := float64(o.n) / d.Seconds()

	// Ceiling: zstd EncodeAll, one core, same data in blocks of the same size.
	ceil, err := zstdCeiling(pool, segment.DefaultBlockSize)
	if err != nil {
		return err
	}
	ceilRate := ceil * float64(o.n) / float64(payload) * 1e6 // items/s at the ceiling MB/s
	fmt.Fprintf(w, "zstd EncodeAll, 1 core (ceiling)\t%.0f\t%.1f\t100%%\tsame records, %d KiB blocks\t\n", ceilRate, ceil, segment.DefaultBlockSize>>10)
	heap := "records cycled from a pool"
	if o.live {
		heap = "live heap " + human(payload+24*int64(o.n))
	}
	fmt.Fprintf(w, "Queue -> fs, buffered\t%.0f\t%.1f\t%.0f%%\t%d segments, %s on disk, %.2fx smaller; %s; peak RSS %s\t\n",
		rate, mb(float64(payload), d), 100*mb(float64(payload), d)/ceil, segs, human(disk), float64(payload)/float64(disk), heap, human(rss))

	// Sustained, Durable, with many producers sharing syncs.
	ddir := filepath.Join(o.dir, "durable")
	dn := *o
	dn.n = min(o.n, 200_000)
	producers := 64
	dd, err := sustained(ddir, codec, &dn, pool, true, producers)
	if err != nil {
		return err
	}
	var dpayload int64
	for i := range dn.n {
		dpayload += int64(len(pool[i%len(pool)]))
	}
	fmt.Fprintf(w, "Queue -> fs, Durable\t%.0f\t%.1f\t%.0f%%\t%d producers, every Enqueue waits for fdatasync\t\n",
		float64(dn.n)/dd.Seconds(), mb(float64(dpayload), dd), 100*mb(float64(dpayload), dd)/ceil, producers)
	_ = os.RemoveAll(ddir)

	// Enqueue latency at fractions of the sustained rate.
	fmt.Fprintf(w, "\t\t\t\t\t\t\n")
	fmt.Fprintf(w, "Enqueue latency\tload items/s\tp50\tp99\tp99.9\tmax\tGC cycles\t\n")
	for _, frac := range []float64{0.25, 0.5, 0.9} {
		ldir := filepath.Join(o.dir, fmt.Sprintf("latency-%.0f", frac*100))
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		lat, achieved, err := latency(ldir, codec, o, pool, rate*frac)
		runtime.ReadMemStats(&ms1)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "at %.0f%% of sustained\t%.0f\t%s\t%s\t%s\t%s\t%d\t\n", frac*100, achieved,
			pct(lat, 0.5), pct(lat, 0.99), pct(lat, 0.999), pct(lat, 1), ms1.NumGC-ms0.NumGC)
		_ = os.RemoveAll(ldir)
	}
	return nil
}

// sustained dumps o.n records from producers goroutines as fast as they go
// and returns the time until Close returned (everything published).
func sustained(dir string, codec dlqdump.Codec, o *options, pool [][]byte, durable bool, producers int) (time.Duration, error) {
	q, err := dlqdump.NewQueue(&dlqdump.Config{
		Writer:         &fs.Writer{Directory: dir},
		Capacity:       o.capacity,
		Codec:          codec,
		Durable:        durable,
		EnqueueTimeout: time.Minute,
	})
	if err != nil {
		return 0, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(o.n) {
					return
				}
				if err := q.Enqueue(pool[i%int64(len(pool))]); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := q.Close(); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if e := firstErr.Load(); e != nil {
		return 0, *e
	}
	return d, nil
}

// latency enqueues at the given rate for o.latency from one paced goroutine
// and returns every Enqueue's duration, sorted, and the rate achieved.
func latency(dir string, codec dlqdump.Codec, o *options, pool [][]byte, rate float64) ([]time.Duration, float64, error) {
	q, err := dlqdump.NewQueue(&dlqdump.Config{
		Writer:         &fs.Writer{Directory: dir},
		Capacity:       o.capacity,
		Codec:          codec,
		EnqueueTimeout: time.Minute,
	})
	if err != nil {
		return nil, 0, err
	}
	defer q.Close()
	lat := make([]time.Duration, 0, int(rate*o.latency.Seconds())+1024)
	const tick = time.Millisecond
	perTick := rate * tick.Seconds()
	start := time.Now()
	var owed float64
	i := 0
	for time.Since(start) < o.latency {
		owed += perTick
		for ; owed >= 1; owed-- {
			t0 := time.Now()
			if err := q.Enqueue(pool[i%len(pool)]); err != nil {
				return nil, 0, err
			}
			lat = append(lat, time.Since(t0))
			i++
		}
		// Sleep to the next tick boundary.
		next := start.Add(time.Duration(len(lat)) * time.Duration(float64(time.Second)/rate))
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	achieved := float64(len(lat)) / time.Since(start).Seconds()
	slices.Sort(lat)
	return lat, achieved, nil
}

func pct(sorted []time.Duration, p float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := min(int(p*float64(len(sorted))), len(sorted)-1)
	d := sorted[i]
	if d < time.Microsecond {
		return fmt.Sprintf("%dns", d.Nanoseconds())
	}
	return fmt.Sprintf("%.1fµs", float64(d.Nanoseconds())/1e3)
}

// zstdCeiling returns the MB/s of payload bytes one core compresses with zstd
// EncodeAll at the default level, in blocks of blockSize bytes made of the
// pool's records.
func zstdCeiling(pool [][]byte, blockSize int) (float64, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return 0, err
	}
	defer enc.Close()
	var blocks [][]byte
	var cur []byte
	for _, r := range pool {
		cur = append(cur, r...)
		if len(cur) >= blockSize {
			blocks = append(blocks, cur)
			cur = nil
			if len(blocks) == 64 {
				break // the first 16 MiB, as the restore ceiling takes
			}
		}
	}
	if len(blocks) == 0 {
		blocks = append(blocks, cur)
	}
	var dst []byte
	var total int64
	start := time.Now()
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		b := blocks[i%len(blocks)]
		dst = enc.EncodeAll(b, dst[:0])
		total += int64(len(b))
	}
	return mb(float64(total), time.Since(start)), nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// originalRestoreRate is the restore rate of koykov/dlqdump measured on this
// machine for 256-byte items (two syscalls per item), the figure to beat
// tenfold.
const originalRestoreRate = 500_000

// benchRestore dumps o.n records, then measures restoring them into a
// destination that accepts everything, beside plain zstd DecodeAll of the
// same blocks.
func benchRestore(w io.Writer, o *options, pool [][]byte) error {
	codec, err := codecOf(o.codec)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.dir, "restore")
	if _, err := sustained(dir, codec, o, pool, false, runtime.GOMAXPROCS(0)); err != nil {
		return err
	}
	var payload int64
	for i := range o.n {
		payload += int64(len(pool[i%len(pool)]))
	}
	ceil, raw, err := decodeCeiling(dir)
	if err != nil {
		return err
	}
	ceilRate := ceil * float64(o.n) / float64(raw) * 1e6

	var delivered atomic.Int64
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader:  &fs.Reader{Directory: dir},
		Decoder: decoder.Fallthrough{},
		Queue:   nopQueue{&delivered},
	})
	if err != nil {
		return err
	}
	defer r.Close()
	debug.FreeOSMemory() // the dump phase's heap must not count
	resetPeakRSS()
	start := time.Now()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	d := time.Since(start)
	if err != nil {
		return err
	}
	rss := peakRSS()
	if rep.Delivered != uint64(o.n) || delivered.Load() != int64(o.n) {
		return fmt.Errorf("restored %d of %d records", rep.Delivered, o.n)
	}
	rate := float64(o.n) / d.Seconds()
	fmt.Fprintf(w, "\t\t\t\t\t\n")
	fmt.Fprintf(w, "restore\titems/s\tMB/s\tof ceiling\tnotes\t\n")
	fmt.Fprintf(w, "%s DecodeAll, 1 core (ceiling)\t%.0f\t%.1f\t100%%\tsame blocks, decode only\t\n", o.codec, ceilRate, ceil*float64(payload)/float64(raw))
	fmt.Fprintf(w, "Restorer <- fs\t%.0f\t%.1f\t%.0f%%\t%d segments, decoded (copied) and enqueued; %.1fx the original dlqdump; peak RSS %s\t\n",
		rate, mb(float64(payload), d), 100*rate/ceilRate, rep.Segments, rate/originalRestoreRate, human(rss))
	return nil
}

// nopQueue accepts everything.
type nopQueue struct{ n *atomic.Int64 }

func (q nopQueue) Enqueue(any) error { q.n.Add(1); return nil }

// decodeCeiling returns the MB/s (of raw block bytes) one core decodes the
// stored blocks of the segments in dir with the codec's plain decoder, and the
// raw bytes of those segments.
func decodeCeiling(dir string) (float64, int64, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.dlq"))
	if err != nil {
		return 0, 0, err
	}
	type stored struct {
		codec segment.Codec
		data  []byte
		raw   int
	}
	var blocks []stored
	var total int64
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, 0, err
		}
		st, _ := f.Stat()
		r, err := segment.NewReader(f, st.Size(), &segment.ReaderOptions{Name: p})
		if err != nil {
			f.Close()
			return 0, 0, err
		}
		for _, b := range r.Footer().Blocks {
			total += int64(b.RawLen)
			if len(blocks) < 64 {
				info, err := r.NextBlock()
				if err != nil {
					f.Close()
					return 0, 0, err
				}
				data := make([]byte, info.StoredLen)
				if _, err := f.ReadAt(data, info.Offset+segment.BlockHeaderSize); err != nil {
					f.Close()
					return 0, 0, err
				}
				blocks = append(blocks, stored{codec: info.Codec, data: data, raw: int(info.RawLen)})
			}
		}
		f.Close()
	}
	if len(blocks) == 0 {
		return 0, 0, fmt.Errorf("no blocks in %s", dir)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return 0, 0, err
	}
	defer dec.Close()
	dst := make([]byte, 0, segment.MaxBlockSize)
	var done int64
	start := time.Now()
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		b := blocks[i%len(blocks)]
		switch b.codec {
		case segment.CodecZstd:
			if _, err := dec.DecodeAll(b.data, dst[:0]); err != nil {
				return 0, 0, err
			}
		case segment.CodecS2:
			if _, err := s2.Decode(dst[:cap(dst)], b.data); err != nil {
				return 0, 0, err
			}
		default: // stored raw: a copy
			dst = append(dst[:0], b.data...)
		}
		done += int64(b.raw)
	}
	return mb(float64(done), time.Since(start)), total, nil
}

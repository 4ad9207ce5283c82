package dlqdump_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
	"github.com/dlqdump/dlqdump/sink"
)

// discardWriter is a sink that keeps nothing, to measure the Queue alone.
type discardWriter struct{}

func (discardWriter) Create(context.Context, string) (sink.SegmentWriter, error) {
	return discardSegment{}, nil
}

type discardSegment struct{}

func (discardSegment) Write(p []byte) (int, error)  { return len(p), nil }
func (discardSegment) Sync() error                  { return nil }
func (discardSegment) Truncate(int64) error         { return nil }
func (discardSegment) Commit(context.Context) error { return nil }
func (discardSegment) Abort() error                 { return nil }

func benchEnqueue(b *testing.B, w dlqdump.Writer, codec dlqdump.Codec, noSummary bool) {
	pool := gen.New(1).Events(1<<14, 256)
	var size int64
	for _, p := range pool {
		size += int64(len(p))
	}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 16 * dlqdump.Megabyte, Codec: codec, NoSummary: noSummary})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size / int64(len(pool)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := q.Enqueue(pool[i%len(pool)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	if err := q.Close(); err != nil { // included: the work is done when published
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkEnqueue measures Enqueue of 256-byte JSON dead letters through to
// published segments, with a sink that discards and with the fs sink, the
// segments with summaries (the default) and, side by side, without
// (Config.NoSummary):
//
//	go test -run '^$' -bench 'BenchmarkEnqueue/discard/zstd' -count 3 .
func BenchmarkEnqueue(b *testing.B) {
	for _, sum := range []struct {
		name string
		off  bool
	}{{"", false}, {"/no-summary", true}} {
		b.Run("discard/zstd"+sum.name, func(b *testing.B) { benchEnqueue(b, discardWriter{}, dlqdump.Zstd, sum.off) })
		b.Run("discard/s2"+sum.name, func(b *testing.B) { benchEnqueue(b, discardWriter{}, dlqdump.S2, sum.off) })
		b.Run("discard/none"+sum.name, func(b *testing.B) { benchEnqueue(b, discardWriter{}, dlqdump.NoCompression, sum.off) })
		b.Run("fs/zstd"+sum.name, func(b *testing.B) { benchEnqueue(b, &fs.Writer{Directory: b.TempDir()}, dlqdump.Zstd, sum.off) })
		b.Run("fs/s2"+sum.name, func(b *testing.B) { benchEnqueue(b, &fs.Writer{Directory: b.TempDir()}, dlqdump.S2, sum.off) })
	}
}

// BenchmarkRestore measures restoring 256-byte JSON dead letters from the fs
// sink into a destination that accepts everything, with the default
// configuration, and reports the peak heap in use beyond the start
// (peak-heap-MiB).
// dumpGenEvents dumps n of gen's realistic events into a new directory in
// segments of 16 MiB, with codec, and returns it and the events' bytes.
func dumpGenEvents(b *testing.B, n int, codec dlqdump.Codec) (dir string, size int64) {
	b.Helper()
	pool := gen.New(1).Events(1<<14, 256)
	dir = b.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 16 * dlqdump.Megabyte, Codec: codec})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		p := pool[i%len(pool)]
		size += int64(len(p))
		if err := q.Enqueue(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, size
}

func BenchmarkRestore(b *testing.B) {
	for _, codec := range []dlqdump.Codec{dlqdump.Zstd, dlqdump.S2} {
		b.Run(codec.String(), func(b *testing.B) {
			dir, size := dumpGenEvents(b, b.N, codec)
			var n atomic.Int64
			r, err := dlqdump.NewRestorer(&dlqdump.Config{
				Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{},
				Queue: queueFunc(func(any) error { n.Add(1); return nil }),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			b.SetBytes(size / int64(b.N))
			b.ReportAllocs()
			b.ResetTimer()
			stop := sampleHeap(nil)
			if err := r.Restore(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(stop())/(1<<20), "peak-heap-MiB")
			if n.Load() != int64(b.N) {
				b.Fatalf("restored %d of %d", n.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

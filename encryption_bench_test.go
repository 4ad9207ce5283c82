//go:build unix

package dlqdump_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
)

// benchEncryption returns the Encryption of a side of BenchmarkEncryption:
// nil, or an age X25519 key for the Queue and the Restorer alike.
func benchEncryption(b *testing.B, on bool) *dlqdump.Encryption {
	if !on {
		return nil
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	return &dlqdump.Encryption{Recipients: []envelope.Recipient{id.Recipient()}, Identities: []envelope.Identity{id}}
}

// BenchmarkEncryption measures dump and restore throughput of 256-byte JSON
// dead letters (zstd, 256 KiB blocks, 16 MiB segments) without and with
// encryption, side by side in one run:
//
//	go test -run '^$' -bench BenchmarkEncryption -count 5 .
//
// dump/discard is the Queue's CPU alone (a sink that keeps nothing),
// dump/fs through to published files, restore/fs from files into a
// destination that takes everything. cpu-ns/op is the process's CPU time
// (user and system, all goroutines) per record: on a loaded machine it
// varies much less than the wall time.
func BenchmarkEncryption(b *testing.B) {
	for _, mode := range []string{"plain", "encrypted"} {
		b.Run("dump/discard/"+mode, func(b *testing.B) {
			benchEncryptedEnqueue(b, discardWriter{}, benchEncryption(b, mode == "encrypted"))
		})
	}
	for _, mode := range []string{"plain", "encrypted"} {
		b.Run("dump/fs/"+mode, func(b *testing.B) {
			benchEncryptedEnqueue(b, &fs.Writer{Directory: b.TempDir()}, benchEncryption(b, mode == "encrypted"))
		})
	}
	for _, mode := range []string{"plain", "encrypted"} {
		b.Run("restore/fs/"+mode, func(b *testing.B) { benchEncryptedRestore(b, benchEncryption(b, mode == "encrypted")) })
	}
}

func benchEncryptedEnqueue(b *testing.B, w dlqdump.Writer, enc *dlqdump.Encryption) {
	pool := gen.New(1).Events(1<<14, 256)
	var size int64
	for _, p := range pool {
		size += int64(len(p))
	}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 16 * dlqdump.Megabyte, Encryption: enc})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size / int64(len(pool)))
	cpu := startCPU(b)
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
	if err := q.Close(); err != nil {
		b.Fatal(err)
	}
	cpu.stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

func benchEncryptedRestore(b *testing.B, enc *dlqdump.Encryption) {
	pool := gen.New(1).Events(1<<14, 256)
	dir := b.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 16 * dlqdump.Megabyte, Encryption: enc})
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for i := range b.N {
		p := pool[i%len(pool)]
		size += int64(len(p))
		if err := q.Enqueue(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{},
		Queue: queueFunc(func(any) error { n.Add(1); return nil }), Encryption: enc,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.SetBytes(size / int64(b.N))
	cpu := startCPU(b)
	if err := r.Restore(context.Background()); err != nil {
		b.Fatal(err)
	}
	cpu.stop()
	b.StopTimer()
	if n.Load() != int64(b.N) {
		b.Fatalf("restored %d of %d", n.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// cpuMeter reports the process's CPU time per op as cpu-ns/op.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startCPU resets the benchmark's timer and starts measuring CPU time.
func startCPU(b *testing.B) *cpuMeter {
	b.ResetTimer()
	return &cpuMeter{b: b, start: processCPU()}
}

func (m *cpuMeter) stop() {
	m.b.ReportMetric(float64(processCPU()-m.start)/float64(m.b.N), "cpu-ns/op")
}

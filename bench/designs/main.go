// Command designs measures, side by side in one process, the dlqdump Queue's
// dump against two bare prototypes of other designs at the same durability
// (each 16 MiB segment fdatasynced, renamed into place and its directory
// synced), on ~300 B generated JSON dead letters kept alive in the heap:
//
//   - ordered: one open block shared by the producers under a mutex (the
//     records keep one order, as in the Queue), a time.Now and an Encoder-like
//     copy per record, the producer that fills a block compresses it outside
//     the lock, one writer appends the blocks in the order they were cut;
//   - perproducer: the same, but each producer fills its own block, so the
//     records of different producers, and a producer's own records while it
//     moves between blocks, lose their order.
//
// Neither prototype checksums, indexes, recovers or accounts for anything.
// They bound what those designs can reach on this machine: docs/PERFORMANCE.md
// quotes them. -sync=false drops the fsyncs.
//
// With -restore it measures the restore side instead (see restoreDesigns):
// the Restorer against a bare decoding pipeline, with and without the
// checkpoint after every block that "a crash delivers at most one block
// twice" needs.
//
//	cd bench && go run ./designs -rounds 3
//	cd bench && go run ./designs -restore -n 2000000 -rounds 4
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
)

var (
	n         = flag.Int("n", 1_000_000, "records")
	size      = flag.Int("size", 300, "average record size")
	rounds    = flag.Int("rounds", 3, "rounds; each runs every system once")
	producers = flag.Int("producers", runtime.GOMAXPROCS(0), "producer goroutines")
	doSync    = flag.Bool("sync", true, "fdatasync each segment before it is renamed into place (the prototypes; the Queue always does)")
	dir       = flag.String("dir", "", "directory for the segments (default: a temporary one, removed after)")
	maxPend   = flag.String("maxpending", "", "the Queue's MaxPending (default its default), e.g. 16MiB")
	only      = flag.String("only", "", "comma-separated systems to run (default all), e.g. queue-none,ordered-none")
	profile   = flag.String("cpuprofile", "", "write a CPU profile of the dumps run to this file")
	restore   = flag.Bool("restore", false, "measure the restore side instead: the Restorer against a bare decoding pipeline, with and without a checkpoint per block")
)

const (
	blockSize   = 256 << 10
	segmentSize = 16 << 20
)

var records []any

func main() {
	flag.Parse()
	for _, r := range gen.New(13).Events(*n, *size) {
		records = append(records, r)
	}
	base := *dir
	if base == "" {
		d, err := os.MkdirTemp("", "dlqdump-designs-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		base = d
	}
	type system struct {
		name string
		run  func(dir string)
	}
	var systems []system
	for _, codec := range []dlqdump.Codec{dlqdump.S2, dlqdump.NoCompression} {
		c := codec
		systems = append(systems,
			system{"queue-" + c.String(), func(d string) { queueRun(d, c) }},
			system{"ordered-" + c.String(), func(d string) { protoRun(d, c == dlqdump.S2, false) }},
			system{"perproducer-" + c.String(), func(d string) { protoRun(d, c == dlqdump.S2, true) }},
		)
	}
	if *only != "" {
		systems = slices.DeleteFunc(systems, func(s system) bool { return !slices.Contains(strings.Split(*only, ","), s.name) })
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	if *restore {
		restoreDesigns(base)
		return
	}
	rate := map[string][]float64{}
	cpu := map[string][]float64{}
	for round := range *rounds {
		// Each round starts with another system, and each system with no
		// dirty pages of the one before it (sync, not timed): the disk's
		// writeback of the previous system's segments would slow whichever
		// runs next.
		for i := range systems {
			s := systems[(round+i)%len(systems)]
			syscall.Sync()
			d := filepath.Join(base, s.name)
			if err := os.RemoveAll(d); err != nil {
				fail(err)
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				fail(err)
			}
			runtime.GC()
			t, c := time.Now(), cpuTime()
			s.run(d)
			wall := time.Since(t)
			rate[s.name] = append(rate[s.name], float64(*n)/wall.Seconds())
			cpu[s.name] = append(cpu[s.name], float64((cpuTime()-c).Nanoseconds())/float64(*n))
			fmt.Fprintf(os.Stderr, "round %d %-18s %9.0f items/s\n", round, s.name, float64(*n)/wall.Seconds())
		}
	}
	fmt.Printf("%d records of ~%d B, %d producers, GOMAXPROCS %d, sync %v, median of %d rounds\n",
		*n, *size, *producers, runtime.GOMAXPROCS(0), *doSync, *rounds)
	fmt.Printf("%-18s %12s %12s %10s\n", "system", "items/s", "CPU ns/item", "÷ queue")
	for _, s := range systems {
		ratio := "-"
		if q := rate["queue-"+codecOf(s.name)]; len(q) > 0 {
			ratio = fmt.Sprintf("%.2f", median(rate[s.name])/median(q))
		}
		fmt.Printf("%-18s %12.0f %12.0f %10s\n", s.name, median(rate[s.name]), median(cpu[s.name]), ratio)
	}
}

func codecOf(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '-' {
			return name[i+1:]
		}
	}
	return name
}

// produce hands every record to enqueue from the producer goroutines.
func produce(enqueue func(x any, state *producer)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range *producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &producer{}
			for {
				i := next.Add(1) - 1
				if i >= int64(len(records)) {
					break
				}
				enqueue(records[i], p)
			}
			enqueue(nil, p) // done: ship what it holds
		}()
	}
	wg.Wait()
}

// producer is a prototype producer's own state.
type producer struct {
	scratch []byte
	block   []byte
	base    int64
}

func queueRun(dir string, codec dlqdump.Codec) {
	var mp dlqdump.MemorySize
	if *maxPend != "" {
		var err error
		mp, err = dlqdump.ParseMemorySize(*maxPend)
		check(err)
	}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: segmentSize, Codec: codec, EnqueueTimeout: time.Minute, MaxPending: mp})
	if err != nil {
		fail(err)
	}
	produce(func(x any, _ *producer) {
		if x == nil {
			return
		}
		if err := q.Enqueue(x); err != nil {
			fail(err)
		}
	})
	if err := q.Close(); err != nil {
		fail(err)
	}
}

// protoRun runs a prototype: see the package documentation.
func protoRun(dir string, useS2, perProducer bool) {
	var (
		mu      sync.Mutex
		shared  = newBlock()
		base    int64
		nextSeq uint64
		seqs    atomic.Uint64
		blocks  = make(chan cut, 64)
		written = make(chan struct{})
	)
	go func() { writeBlocks(dir, blocks); close(written) }()
	ship := func(seq uint64, raw []byte) {
		if useS2 {
			out := getBuf(&encoded, s2.MaxEncodedLen(blockSize+blockSize/8))
			enc := s2.Encode(out[:cap(out)], raw)
			putBuf(&raws, raw)
			blocks <- cut{seq, enc, &encoded}
			return
		}
		blocks <- cut{seq, raw, &raws}
	}
	produce(func(x any, p *producer) {
		if x == nil {
			if perProducer && len(p.block) > 0 {
				ship(seqs.Add(1)-1, p.block)
			}
			return
		}
		p.scratch = append(p.scratch[:0], x.([]byte)...) // the Encoder's copy
		now := time.Now().UnixNano()
		if perProducer {
			if p.block == nil {
				p.block = newBlock()
			}
			if len(p.block) == 0 {
				p.base = now
			}
			p.block = appendRecord(p.block, now-p.base, p.scratch)
			if len(p.block) >= blockSize {
				ship(seqs.Add(1)-1, p.block)
				p.block = newBlock()
			}
			return
		}
		mu.Lock()
		if len(shared) == 0 {
			base = now
		}
		shared = appendRecord(shared, now-base, p.scratch)
		if len(shared) >= blockSize {
			full, seq := shared, nextSeq
			nextSeq++
			shared = newBlock()
			mu.Unlock()
			ship(seq, full)
			return
		}
		mu.Unlock()
	})
	if !perProducer && len(shared) > 0 {
		ship(nextSeq, shared)
	}
	close(blocks)
	<-written
}

// raws and encoded keep the blocks' buffers for reuse, as the Queue does.
var raws, encoded sync.Pool

func newBlock() []byte { return getBuf(&raws, blockSize+blockSize/8) }

func getBuf(p *sync.Pool, size int) []byte {
	if b, ok := p.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, size)
}

func putBuf(p *sync.Pool, b []byte) { p.Put(&b) }

func appendRecord(b []byte, dt int64, body []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(body)+binary.MaxVarintLen64))
	b = binary.AppendVarint(b, dt)
	return append(b, body...)
}

type cut struct {
	seq  uint64
	buf  []byte
	pool *sync.Pool // where buf goes back once written
}

// writeBlocks appends the blocks in sequence order to segments of
// segmentSize, each published like the fs sink does.
func writeBlocks(dir string, blocks <-chan cut) {
	waiting := map[uint64]cut{}
	var (
		next uint64
		f    *os.File
		size int64
		segs int
	)
	publish := func() {
		if *doSync {
			check(f.Sync())
		}
		check(f.Close())
		name := filepath.Join(dir, fmt.Sprintf("%06d", segs))
		check(os.Rename(name+".tmp", name+".seg"))
		if *doSync {
			d, err := os.Open(dir)
			check(err)
			check(d.Sync())
			check(d.Close())
		}
		segs++
		f = nil
	}
	for c := range blocks {
		waiting[c.seq] = c
		for {
			c, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			next++
			if f == nil {
				var err error
				f, err = os.Create(filepath.Join(dir, fmt.Sprintf("%06d.tmp", segs)))
				check(err)
				size = 0
			}
			_, err := f.Write(c.buf)
			check(err)
			putBuf(c.pool, c.buf)
			if size += int64(len(c.buf)); size >= segmentSize {
				publish()
			}
		}
	}
	if f != nil {
		publish()
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func check(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "designs:", err)
	os.Exit(1)
}

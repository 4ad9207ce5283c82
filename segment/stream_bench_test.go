package segment

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/gen"
	"github.com/klauspost/compress/zstd"
)

// restoreCorpus is a segment of realistic dead letters, as the Queue dumps
// them: JSON events of about 300 bytes with random ids, names, amounts and
// text (package gen), two headers each, zstd at the default level in blocks
// of the default size. events stays alive while the benchmarks run, as the
// data set does in a service: the garbage collector has a live heap to mark.
type restoreCorpus struct {
	events  [][]byte
	data    []byte
	stored  [][]byte // each block's stored bytes, for the ceiling
	raw     int64    // raw bytes of all blocks
	records int
}

var (
	corpusOnce sync.Once
	corpus     *restoreCorpus
)

// corpusRecords is the size of the restore corpus: about 60 MB of records,
// 230 blocks.
const corpusRecords = 200_000

func restoreData(b *testing.B) *restoreCorpus {
	corpusOnce.Do(func() {
		c := &restoreCorpus{events: gen.New(13).Events(corpusRecords, 300)}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(CodecZstd), nil)
		if err != nil {
			panic(err)
		}
		reasons := []string{"leak", "refused", "timeout"}
		var body []byte
		t0 := genBaseTime.UnixNano()
		for i, e := range c.events {
			body = AppendHeaderPairs(body[:0], "reason", reasons[i%3], "source", "orders")
			body = append(body, e...)
			if err := w.AddRecord(t0+int64(i)*1000, body); err != nil {
				panic(err)
			}
		}
		if err := w.Close(); err != nil {
			panic(err)
		}
		c.data, c.records = buf.Bytes(), len(c.events)
		for _, bi := range w.index {
			c.stored = append(c.stored, c.data[bi.Offset+BlockHeaderSize:bi.End()])
			c.raw += int64(bi.RawLen)
		}
		corpus = c
	})
	return corpus
}

// ceilingPass decompresses every block of the corpus with zstd DecodeAll on
// one goroutine into one reused buffer: the one-core ceiling.
func ceilingPass(b *testing.B, c *restoreCorpus, dec *zstd.Decoder, dst []byte) []byte {
	var err error
	for _, s := range c.stored {
		if dst, err = dec.DecodeAll(s, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
	return dst
}

// streamPass restores the corpus as the Restorer does with a Stream: every
// block decoded ahead by workers goroutines (0: ReadBlock on this
// goroutine), every record decoded by decoder.Fallthrough and its headers
// looked at, every block released.
func streamPass(b *testing.B, c *restoreCorpus, workers int, reuse bool) {
	r, err := NewReader(bytes.NewReader(c.data), int64(len(c.data)), nil)
	if err != nil {
		b.Fatal(err)
	}
	var n, size int
	var dec decoder.Fallthrough
	use := func(rec Record) {
		x, _ := dec.Decode(rec.Payload)
		v, _ := rec.Headers.Lookup("reason")
		size += len(x.([]byte)) + len(v)
		n++
	}
	if workers == 0 {
		var blk Block
		for {
			err := r.ReadBlock(&blk)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			for rec := range blk.Records() {
				use(rec)
			}
		}
	} else {
		s := NewStream(r, &StreamOptions{Workers: workers, Reuse: reuse})
		for {
			blk, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			for rec := range blk.Records() {
				use(rec)
			}
			blk.Release()
		}
		s.Close()
	}
	if n != c.records || size == 0 {
		b.Fatalf("%d records", n)
	}
}

// BenchmarkRestoreDecode measures decoding and going through every record
// of a realistic segment (restoreData) with a Stream of 1 and 2 workers,
// side by side with the ceiling, zstd DecodeAll of the same blocks on one
// core: each op is one pass of each, interleaved, so that the machine's
// load weighs on them alike. It reports each one's raw MB/s and their
// ratios to the ceiling (the goal for the whole restore: 0.8 with one
// core, 1.2 with two), and the same for Streams with Reuse (for decoders
// that copy: no new memory per block), for ReadBlock on one goroutine and for
// a copy of every payload (decoder.Fallthrough{Copy: true}, as restoring
// did before).
//
//	go test ./segment -run '^$' -bench BenchmarkRestoreDecode -benchtime 40x
func BenchmarkRestoreDecode(b *testing.B) {
	c := restoreData(b)
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Close()
	dst := make([]byte, 0, DefaultBlockSize+1024)
	passes := []struct {
		name   string
		run    func()
		d, cpu time.Duration
	}{
		{name: "ceiling", run: func() { dst = ceilingPass(b, c, dec, dst) }},
		{name: "stream1", run: func() { streamPass(b, c, 1, false) }},
		{name: "stream2", run: func() { streamPass(b, c, 2, false) }},
		{name: "stream1reuse", run: func() { streamPass(b, c, 1, true) }},
		{name: "stream2reuse", run: func() { streamPass(b, c, 2, true) }},
		{name: "readblock", run: func() { streamPass(b, c, 0, false) }},
		{name: "copy", run: func() { copyPass(b, c) }},
	}
	for i := range passes {
		passes[i].run() // warm up
	}
	b.SetBytes(c.raw)
	b.ResetTimer()
	for b.Loop() {
		for i := range passes {
			start, cpu := time.Now(), cpuTime()
			passes[i].run()
			passes[i].d += time.Since(start)
			passes[i].cpu += cpuTime() - cpu
		}
	}
	ceiling := passes[0]
	for _, p := range passes {
		b.ReportMetric(float64(c.raw)*float64(b.N)/p.d.Seconds()/1e6, p.name+"-MB/s")
		if p.name != "ceiling" {
			b.ReportMetric(ceiling.d.Seconds()/p.d.Seconds(), p.name+"/ceiling")
			// CPU used by all goroutines, relative to the ceiling's: the
			// cost of the work, which the machine's load does not change.
			b.ReportMetric(p.cpu.Seconds()/ceiling.cpu.Seconds(), p.name+"-cpu/ceiling-cpu")
		}
	}
	b.ReportMetric(float64(c.records)/float64(len(c.stored)), "records/block")
	b.ReportMetric(float64(c.raw)/float64(len(c.data)), "ratio")
}

// cpuTime returns the CPU time the process used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// copyPass is streamPass with one worker and a copy of every payload, as
// restoring did before blocks were shared.
func copyPass(b *testing.B, c *restoreCorpus) {
	r, err := NewReader(bytes.NewReader(c.data), int64(len(c.data)), nil)
	if err != nil {
		b.Fatal(err)
	}
	s := NewStream(r, &StreamOptions{Workers: 1, Reuse: true})
	defer s.Close()
	dec := decoder.Fallthrough{Copy: true}
	n := 0
	for {
		blk, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		for rec := range blk.Records() {
			x, _ := dec.Decode(rec.Payload)
			n += len(x.([]byte))
		}
		blk.Release()
	}
	if n == 0 {
		b.Fatal("no records")
	}
}

// BenchmarkStream measures each way of restoring the corpus on its own: one
// op is one pass over the whole corpus.
func BenchmarkStream(b *testing.B) {
	c := restoreData(b)
	for _, v := range []struct {
		workers int
		reuse   bool
	}{{0, false}, {1, false}, {2, false}, {2, true}, {4, false}} {
		name := fmt.Sprintf("workers=%d", v.workers)
		if v.reuse {
			name += "/reuse"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(c.raw)
			for b.Loop() {
				streamPass(b, c, v.workers, v.reuse)
			}
			reportItems(b, b.N*c.records)
		})
	}
}

package segment

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// benchRecordSize is the payload size of the benchmarks' records.
const benchRecordSize = 256

// benchRecords are 4096 distinct 256-byte JSON dead letters with their
// headers and times.
var benchPayloads = func() [][]byte {
	p := make([][]byte, 4096)
	for i := range p {
		p[i] = appendJSONRecord(nil, uint64(i)*2654435761, benchRecordSize)
	}
	return p
}()

func benchHeaders(i int) map[string]string {
	h, _ := smallHeaders(uint64(i))
	return h
}

func reportItems(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkWriter measures Writer.Add of 256-byte JSON records with a few
// headers, compression and block writes included. One op is one record.
func BenchmarkWriter(b *testing.B) {
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			w, err := NewWriter(io.Discard, testHeader(codec), nil)
			if err != nil {
				b.Fatal(err)
			}
			t0 := genBaseTime
			b.SetBytes(benchRecordSize)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				i := n & 4095
				if err := w.Add(t0.Add(time.Duration(n)*time.Microsecond), benchHeaders(i), benchPayloads[i]); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			reportItems(b, n)
		})
	}
}

// benchSegment returns a sealed segment of n benchmark records.
func benchSegment(b *testing.B, codec Codec, n int) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(codec), nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if err := w.Add(genBaseTime.Add(time.Duration(i)*time.Microsecond), benchHeaders(i&4095), benchPayloads[i&4095]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReader measures Reader.Next over a segment of 256-byte JSON
// records, checksums and decompression included. One op is one record.
func BenchmarkReader(b *testing.B) {
	const records = 1 << 16
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			data := benchSegment(b, codec, records)
			r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchRecordSize)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				rec, err := r.Next()
				if err == io.EOF {
					if err := r.Seek(Position{}); err != nil {
						b.Fatal(err)
					}
					rec, err = r.Next()
				}
				if err != nil {
					b.Fatal(err)
				}
				if len(rec.Payload) != benchRecordSize {
					b.Fatalf("payload of %d bytes", len(rec.Payload))
				}
				n++
			}
			reportItems(b, n)
			b.ReportMetric(float64(len(data))/float64(records*benchRecordSize), "stored/payload")
		})
	}
}

// benchBlock returns a block builder holding 256 KiB of benchmark records.
func benchBlock() *BlockBuilder {
	var bb BlockBuilder
	var body []byte
	for i := 0; bb.Len() < DefaultBlockSize; i++ {
		body = append(AppendHeaders(body[:0], benchHeaders(i&4095)), benchPayloads[i&4095]...)
		if bb.Len()+RecordSize(len(body)) > DefaultBlockSize {
			break
		}
		bb.Add(genBaseTime.UnixNano()+int64(i)*1000, body)
	}
	return &bb
}

// BenchmarkCompressor measures Compressor.Encode of one 256 KiB block.
func BenchmarkCompressor(b *testing.B) {
	bb := benchBlock()
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			c, err := NewCompressor(codec, 0)
			if err != nil {
				b.Fatal(err)
			}
			var eb EncodedBlock
			b.SetBytes(int64(bb.Len()))
			b.ReportAllocs()
			for b.Loop() {
				c.Encode(&eb, bb)
			}
			reportItems(b, b.N*bb.Count())
			b.ReportMetric(float64(eb.Len())/float64(bb.Len()), "ratio")
		})
	}
}

// BenchmarkZstdEncodeAll is the baseline for BenchmarkCompressor/zstd:
// klauspost's zstd EncodeAll of the same raw block with default options.
func BenchmarkZstdEncodeAll(b *testing.B) {
	raw := benchBlock().Raw()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, len(raw))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		dst = enc.EncodeAll(raw, dst[:0])
	}
	b.ReportMetric(float64(len(dst))/float64(len(raw)), "ratio")
}

// BenchmarkZstdDecodeAll is the baseline for decompressing a block: zstd
// DecodeAll of the raw block compressed as Compressor does it.
func BenchmarkZstdDecodeAll(b *testing.B) {
	bb := benchBlock()
	c, err := NewCompressor(CodecZstd, 0)
	if err != nil {
		b.Fatal(err)
	}
	var eb EncodedBlock
	c.Encode(&eb, bb)
	stored := eb.buf[BlockHeaderSize:]
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, bb.Len())
	b.SetBytes(int64(bb.Len()))
	b.ReportAllocs()
	for b.Loop() {
		dst, err = dec.DecodeAll(stored, dst[:0])
		if err != nil || len(dst) != bb.Len() {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBlock measures what the reader does with that block:
// decompression into a buffer of the block's raw size.
func BenchmarkDecodeBlock(b *testing.B) {
	bb := benchBlock()
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			c, err := NewCompressor(codec, 0)
			if err != nil {
				b.Fatal(err)
			}
			var eb EncodedBlock
			c.Encode(&eb, bb)
			stored := eb.buf[BlockHeaderSize:]
			dst := make([]byte, bb.Len()+decodeSlack)
			b.SetBytes(int64(bb.Len()))
			b.ReportAllocs()
			for b.Loop() {
				out, _, err := decodeBlock(eb.info.Codec, stored, dst, bb.Len(), true)
				if err != nil || len(out) != bb.Len() {
					b.Fatal(err)
				}
			}
		})
	}
}

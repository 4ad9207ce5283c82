package segment

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// BenchmarkSealed measures what encryption costs one goroutine: writing
// (compressing and sealing) and reading (opening and decompressing)
// 256-byte JSON records with zstd, without and with a data key, side by
// side; and AES-256-GCM alone on a block's stored bytes.
//
//	go test -run '^$' -bench BenchmarkSealed -count 5 ./segment
func BenchmarkSealed(b *testing.B) {
	key := testDataKey("bench")
	for _, mode := range []string{"plain", "encrypted"} {
		b.Run("write/"+mode, func(b *testing.B) {
			opts := &WriterOptions{}
			if mode == "encrypted" {
				opts.Key = key
			}
			w, err := NewWriter(io.Discard, testHeader(CodecZstd), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchRecordSize)
			n := 0
			for b.Loop() {
				i := n & 4095
				if err := w.Add(genBaseTime.Add(time.Duration(n)*time.Microsecond), benchHeaders(i), benchPayloads[i]); err != nil {
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
	for _, mode := range []string{"plain", "encrypted"} {
		b.Run("read/"+mode, func(b *testing.B) {
			var buf bytes.Buffer
			wo, ro := &WriterOptions{}, &ReaderOptions{}
			if mode == "encrypted" {
				wo.Key, ro.Keys = key, testKeys{key}
			}
			w, err := NewWriter(&buf, testHeader(CodecZstd), wo)
			if err != nil {
				b.Fatal(err)
			}
			for i := range 1 << 16 {
				if err := w.Add(genBaseTime.Add(time.Duration(i)*time.Microsecond), benchHeaders(i&4095), benchPayloads[i&4095]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ro)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchRecordSize)
			n := 0
			for b.Loop() {
				_, err := r.Next()
				if err == io.EOF {
					if err := r.Seek(Position{}); err != nil {
						b.Fatal(err)
					}
					_, err = r.Next()
				}
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			reportItems(b, n)
		})
	}
	b.Run("aes-gcm/64KiB", func(b *testing.B) {
		salt := newSalt()
		s, err := newSealer(key.Key, &salt, 1)
		if err != nil {
			b.Fatal(err)
		}
		plain := make([]byte, 64<<10)
		hdr := make([]byte, 56)
		out := make([]byte, 0, len(plain)+TagSize)
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			out = s.seal(out[:0], hdr, plain, 1)
			if _, err := s.open(plain[:0], hdr, out, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

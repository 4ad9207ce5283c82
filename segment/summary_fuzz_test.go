package segment

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// FuzzSummary feeds summary sections to the parser: it never panics, and
// what it parses answers every question without panicking. The seeds are a
// real summary, with its checksum made right again after each mutation as
// well as not, so that the parser's checks after the checksum are reached.
//
//	go test -run '^$' -fuzz FuzzSummary ./segment
func FuzzSummary(f *testing.F) {
	data := writeRecords(f, CodecZstd, &WriterOptions{Summarize: true, BlockSize: 2 << 10}, summaryRecs(60))
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		f.Fatal(err)
	}
	sum := data[r.end : r.end+r.footer.SummaryBytes]
	blocks := len(r.footer.Blocks)
	f.Add(bytes.Clone(sum), uint16(blocks), true)
	f.Add(bytes.Clone(sum), uint16(blocks+1), false)
	f.Add([]byte{}, uint16(0), true)
	f.Fuzz(func(t *testing.T, b []byte, blocks uint16, fixCRC bool) {
		if fixCRC && len(b) >= 4 {
			binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castag))
		}
		s, err := parseSummary(b, int(blocks), nil)
		if err != nil {
			if s != nil {
				t.Fatal("a summary with an error")
			}
			return
		}
		if s.Blocks() != int(blocks) {
			t.Fatalf("%d blocks parsed, %d wanted", s.Blocks(), blocks)
		}
		for i := -1; i <= s.Blocks(); i++ {
			s.BlockMayHave(i, "reason", "failed")
			s.BlockMayHaveKey(i, "order")
			s.BlockMayContain(i, []byte("ord-00001"), i%2 == 0)
		}
		s.MayHave("reason", "leak")
		s.Values("reason")
	})
}

package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
)

// tamperSegment is an encrypted segment of several blocks and what it
// holds, for tampering with its sealed bytes the way someone who can write
// to the store but has no key would: a byte changed, the block's checksum
// made right again.
type tamperSegment struct {
	data   []byte
	recs   []rec
	blocks []BlockInfo
	footer int64 // offset of the footer
	keys   KeyUnwrapper
}

func newTamperSegment(t testing.TB, codec Codec) *tamperSegment {
	t.Helper()
	key := testDataKey("tamper")
	recs := testRecords(120)
	s := &tamperSegment{recs: recs, keys: testKeys{key}}
	s.data = encryptedSegment(t, codec, 700, key, recs)
	r := open(t, s.data, &ReaderOptions{Keys: s.keys})
	s.blocks = r.Footer().Blocks
	if len(s.blocks) < 4 {
		t.Fatalf("%s: %d blocks", codec, len(s.blocks))
	}
	s.footer = s.blocks[len(s.blocks)-1].End()
	return s
}

// tamper returns a copy of the segment with byte pos of block i's sealed
// bytes (the tag included) xored with x and the block's checksum fixed.
func (s *tamperSegment) tamper(i, pos int, x byte) []byte {
	d := bytes.Clone(s.data)
	b := s.blocks[i]
	d[b.Offset+BlockHeaderSize+int64(pos)] ^= x
	fixBlockCRC(d, b.Offset)
	return d
}

// check reads data, in which the blocks in bad were tampered with, with
// Next, ReadBlock and Streams of several options, with the footer and
// without it (unsealed): each must report every tampered block as a
// *CorruptError at its offset, once, go on past it and return every
// record of the other blocks, unchanged.
func (s *tamperSegment) check(t *testing.T, data []byte, bad ...int) {
	t.Helper()
	const name = "tampered.dlq"
	opts := &ReaderOptions{Name: name, Keys: s.keys}
	for _, unsealed := range []bool{false, true} {
		d := data
		if unsealed {
			d = data[:s.footer]
		}
		what := fmt.Sprintf("blocks %v tampered, unsealed %v", bad, unsealed)
		wantErrs := make([]int64, 0, len(bad))
		want := make([]bool, len(s.recs))
		for i, b := range s.blocks {
			if slices.Contains(bad, i) {
				wantErrs = append(wantErrs, b.Offset)
				continue
			}
			for k := range b.Count {
				want[b.FirstSeq+uint64(k)] = true
			}
		}
		type result struct {
			got  []bool
			errs []int64
		}
		record := func(res *result, rec Record) {
			t.Helper()
			if rec.Seq >= uint64(len(s.recs)) || !want[rec.Seq] || res.got[rec.Seq] {
				t.Fatalf("%s: record %d returned (from a tampered block, or twice)", what, rec.Seq)
			}
			checkRecord(t, rec, rec.Seq, &s.recs[rec.Seq])
			res.got[rec.Seq] = true
		}
		damage := func(res *result, err error) {
			t.Helper()
			ce := checkCorruptError(t, err, name)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: %v does not wrap ErrCorrupt", what, err)
			}
			res.errs = append(res.errs, ce.Offset)
		}
		checkResult := func(api string, res *result) {
			t.Helper()
			if !slices.Equal(res.got, want) {
				t.Fatalf("%s, %s: records %v, want %v", what, api, seqs(res.got), seqs(want))
			}
			if !slices.Equal(res.errs, wantErrs) {
				t.Fatalf("%s, %s: damage reported at offsets %v, want %v", what, api, res.errs, wantErrs)
			}
		}
		limit := len(s.recs) + 2*len(s.blocks) + 4

		// Next.
		res := &result{got: make([]bool, len(s.recs))}
		r := open(t, d, opts)
		for calls := 0; ; calls++ {
			if calls > limit {
				t.Fatalf("%s: Next does not end", what)
			}
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				damage(res, err)
				continue
			}
			record(res, rec)
		}
		checkResult("Next", res)

		// ReadBlock.
		res = &result{got: make([]bool, len(s.recs))}
		r = open(t, d, opts)
		var blk Block
		for calls := 0; ; calls++ {
			if calls > limit {
				t.Fatalf("%s: ReadBlock does not end", what)
			}
			err := r.ReadBlock(&blk)
			if err == io.EOF {
				break
			}
			if err != nil {
				damage(res, err)
				continue
			}
			for rec := range blk.Records() {
				record(res, rec)
			}
		}
		checkResult("ReadBlock", res)

		// Streams, as the Restorer reads.
		for _, so := range streamOptionSets {
			res = &result{got: make([]bool, len(s.recs))}
			st := NewStream(open(t, d, opts), so)
			for calls := 0; ; calls++ {
				if calls > limit {
					t.Fatalf("%s: Stream does not end", what)
				}
				b, err := st.Next(context.Background())
				if err == io.EOF {
					break
				}
				if err != nil {
					damage(res, err)
					continue
				}
				for rec := range b.Records() {
					record(res, rec)
				}
				b.Release()
			}
			st.Close()
			checkResult(fmt.Sprintf("Stream %+v", so), res)
		}
	}
}

// TestTamperEveryBlock changes a byte of the sealed bytes of every block of
// an encrypted segment in turn (the first, one in the middle, the last of
// the tag), checksum fixed, then of two blocks at once: Next, ReadBlock and
// the Stream report each such block as damage and read on past it. An
// opened block used to leave the reader's plaintext storage pointing into
// its read buffer after failing authentication, so that opening the next
// block there panicked with "crypto/cipher: invalid buffer overlap".
func TestTamperEveryBlock(t *testing.T) {
	t.Parallel()
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			t.Parallel()
			s := newTamperSegment(t, codec)
			for i, b := range s.blocks {
				n := int(b.StoredLen)
				for _, pos := range []int{0, n / 2, n - 1} {
					s.check(t, s.tamper(i, pos, 0x20), i)
				}
			}
			last := len(s.blocks) - 1
			for _, pair := range [][2]int{{0, 1}, {0, 2}, {1, last}, {0, last}} {
				d := s.tamper(pair[0], 3, 1)
				b := s.blocks[pair[1]]
				d[b.Offset+BlockHeaderSize+7] ^= 0x80
				fixBlockCRC(d, b.Offset)
				s.check(t, d, pair[0], pair[1])
			}
		})
	}
}

// FuzzTamper changes one byte of the sealed bytes of one block of an
// encrypted segment, checksum fixed, and checks what TestTamperEveryBlock
// checks.
func FuzzTamper(f *testing.F) {
	f.Add(uint8(0), uint16(0), byte(1))
	f.Add(uint8(1), uint16(9), byte(0x80))
	f.Add(uint8(3), uint16(600), byte(0xff))
	segs := map[Codec]*tamperSegment{}
	for _, c := range allCodecs {
		segs[c] = newTamperSegment(f, c)
	}
	f.Fuzz(func(t *testing.T, block uint8, pos uint16, x byte) {
		if x == 0 {
			return
		}
		s := segs[allCodecs[int(block)%len(allCodecs)]]
		i := int(block) / len(allCodecs) % len(s.blocks)
		s.check(t, s.tamper(i, int(pos)%int(s.blocks[i].StoredLen), x), i)
	})
}

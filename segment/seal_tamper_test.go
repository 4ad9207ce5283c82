package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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

// readAllWays reads data with Next, ReadBlock and a Stream, and returns,
// for each, the sequence numbers of the records read and the offsets of the
// damage reported; it fails the test on any other error.
func readAllWays(t *testing.T, data []byte, opts *ReaderOptions) map[string][2][]uint64 {
	t.Helper()
	out := map[string][2][]uint64{}
	add := func(api string, seq uint64, off int64, isErr bool) {
		v := out[api]
		if isErr {
			v[1] = append(v[1], uint64(off))
		} else {
			v[0] = append(v[0], seq)
		}
		out[api] = v
	}
	damage := func(err error) int64 {
		t.Helper()
		ce := checkCorruptError(t, err, opts.Name)
		return ce.Offset
	}
	r := open(t, data, opts)
	for range 10000 {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			add("Next", 0, damage(err), true)
			continue
		}
		add("Next", rec.Seq, 0, false)
	}
	r = open(t, data, opts)
	var b Block
	for range 10000 {
		err := r.ReadBlock(&b)
		if err == io.EOF {
			break
		}
		if err != nil {
			add("ReadBlock", 0, damage(err), true)
			continue
		}
		for rec := range b.Records() {
			add("ReadBlock", rec.Seq, 0, false)
		}
	}
	st := NewStream(open(t, data, opts), &StreamOptions{Workers: 2})
	defer st.Close()
	for range 10000 {
		blk, err := st.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			add("Stream", 0, damage(err), true)
			continue
		}
		for rec := range blk.Records() {
			add("Stream", rec.Seq, 0, false)
		}
		blk.Release()
	}
	return out
}

// TestMissingBlocks removes whole blocks from a segment, as someone who can
// write to the store can (the blocks that stay are intact and, encrypted,
// authenticate): the first, one in the middle, two; the footer then no
// longer matches (its index must count every record), so the segment reads
// as unsealed, its footer as damage after the blocks, as it also does with
// the footer cut off. Every reader
// reports the missing records as damage at the block after them, and
// returns all the others. Before, records missing between intact blocks
// were skipped without a word.
func TestMissingBlocks(t *testing.T) {
	t.Parallel()
	key := testDataKey("missing")
	recs := testRecords(120)
	for _, enc := range []bool{false, true} {
		wo := &WriterOptions{BlockSize: 700}
		ro := &ReaderOptions{Name: "missing.dlq"}
		if enc {
			wo.Key, ro.Keys = key, testKeys{key}
		}
		data := writeRecords(t, CodecZstd, wo, recs)
		blocks := open(t, data, ro).Footer().Blocks
		last := len(blocks) - 1
		if last < 4 {
			t.Fatalf("%d blocks", len(blocks))
		}
		footer := blocks[last].End()
		for _, drop := range [][]int{{0}, {2}, {1, 3}, {1, 2}} {
			for _, keepFooter := range []bool{true, false} {
				// The segment without the dropped blocks.
				var d []byte
				d = append(d, data[:blocks[0].Offset]...)
				var wantSeqs []uint64
				var wantErrs []uint64
				gapOpen := false
				for i, b := range blocks {
					if slices.Contains(drop, i) {
						gapOpen = true
						continue
					}
					if gapOpen {
						wantErrs = append(wantErrs, uint64(len(d)))
						gapOpen = false
					}
					d = append(d, data[b.Offset:b.End()]...)
					for k := range uint64(b.Count) {
						wantSeqs = append(wantSeqs, b.FirstSeq+k)
					}
				}
				if keepFooter {
					// It no longer fits: read as damage after the
					// blocks.
					wantErrs = append(wantErrs, uint64(len(d)))
					d = append(d, data[footer:]...)
				}
				for api, got := range readAllWays(t, d, ro) {
					if !slices.Equal(got[0], wantSeqs) || !slices.Equal(got[1], wantErrs) {
						t.Fatalf("encrypted %v, blocks %v dropped, footer kept %v: %s read records %v, damage at %v; want %v, damage at %v",
							enc, drop, keepFooter, api, got[0], got[1], wantSeqs, wantErrs)
					}
				}
			}
		}
	}
}

// TestFooterLies changes an encrypted segment's footer index (not
// authenticated), checksum fixed, so that it no longer matches the blocks:
// read with the key, the footer is reported once and every record is
// returned, the blocks' headers being authenticated; without the key,
// checksums only, the blocks it does not match are damage.
func TestFooterLies(t *testing.T) {
	t.Parallel()
	key := testDataKey("footer")
	recs := testRecords(120)
	data := writeRecords(t, CodecZstd, &WriterOptions{BlockSize: 700, Key: key}, recs)
	blocks := open(t, data, &ReaderOptions{Keys: testKeys{key}}).Footer().Blocks
	foff := blocks[len(blocks)-1].End()
	e1 := foff + FooterFixedSize + IndexEntrySize
	e2 := e1 + IndexEntrySize
	le := binary.LittleEndian
	le.PutUint32(data[e1+16:], le.Uint32(data[e1+16:])-1)
	le.PutUint64(data[e2+8:], le.Uint64(data[e2+8:])-1)
	le.PutUint32(data[e2+16:], le.Uint32(data[e2+16:])+1)
	flen := int64(len(data)) - TrailerSize - foff
	le.PutUint32(data[foff+flen-4:], crc32.Checksum(data[foff:foff+flen-4], castag))
	ro := &ReaderOptions{Name: "lies.dlq", Keys: testKeys{key}}
	if !open(t, data, ro).Sealed() {
		t.Fatal("the forged footer is not taken as one")
	}
	var all []uint64
	for i := range uint64(len(recs)) {
		all = append(all, i)
	}
	for api, got := range readAllWays(t, data, ro) {
		if !slices.Equal(got[0], all) || !slices.Equal(got[1], []uint64{uint64(blocks[1].Offset)}) {
			t.Fatalf("%s: records %v, damage at %v; want all, damage at %d", api, got[0], got[1], blocks[1].Offset)
		}
	}
	r := open(t, data, &ReaderOptions{Name: "lies.dlq"})
	var damaged int
	for {
		_, err := r.VerifyBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			damaged++
		}
	}
	if damaged == 0 {
		t.Fatal("without the key, the blocks the footer does not match pass")
	}
}

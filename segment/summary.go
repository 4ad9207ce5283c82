package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// Summaries. A segment written with WriterOptions.Summarize carries, between
// its last block and its footer, a summary of its records: what a selection
// needs to skip the segment, or blocks of it, without reading them. Like
// ClickHouse's data-skipping indexes and Parquet's statistics and bloom
// filters, a summary only ever says "no record here can match" or "some
// may": a segment without one, or with one that is damaged, is read.
//
//	summary = sumMagic:u32 version:u8 flags:u8 reserved:u16 counter:u32
//	          bodyLen:u32 body[bodyLen] crc:u32
//	body    = blocks:uvarint bodyFlags:u8 keyCount:uvarint key*
//	          filters*blocks                     (sealed when flags bit 0)
//	key     = name:str kind:u8 [valueCount:uvarint value:str*]
//	filters = fflags:u8 [hdrLen:uvarint hdrBits] [gramLog2:u8 gramBits]
//	str     = len:uvarint bytes
//
// The footer says the summary's length (summaryLen). The CRC32C covers the
// summary's bytes before it. bodyFlags bit 0 says the keys list every
// header key of the segment's records (a key not listed is in no record).
// A key's kind is 0 when its values are all listed (an exact set of at most
// 64 values), 1 when there are more. There is one filters entry per block
// of the footer's index, in order: fflags bit 0 says a payload of the block
// holds a backslash (a JSON text with escapes, which may hold a value
// without its text), bit 1 that a header filter follows, bit 2 an n-gram
// filter. A header filter is a bloom filter of hdrLen bytes (8 to 8192)
// with 6 hash functions over every header key and every key and value of
// the block's records (pairHash: with h1 its low 32 bits and h2 its high
// ones, or 1, bit (h1 + i*h2) mod its size in bits, i from 0 to 5); an
// n-gram filter one of 2^gramLog2 bits and one hash
// function over every three consecutive bytes of each payload (gramHash;
// a filter of 2^l bits sets bit gramHash >> (32-l)). Bits are numbered
// from bit 0 of byte 0.
//
// In an encrypted segment (format version 2) the body is sealed with the
// block key like a block, under the nonce counter the writer takes after its
// last block's (counter; 0 when not sealed), with the summary's first 16
// bytes as authenticated data: without the key a summary says nothing, and
// what it says cannot be told.

const (
	sumMagic   = 0x53514c44 // "DLQS" little endian
	sumVersion = 1
	sumSealed  = 1 // summary flags
	sumFixed   = 16

	sumAllKeys = 1 // body flags

	filtEscapes = 1 // filters flags
	filtHeaders = 2
	filtGrams   = 4

	keyExact = 0
	keyMany  = 1

	// MaxSummarySize caps a summary: the footer has 24 bits for its
	// length. A Writer folds its filters to fit much less (summaryBudget).
	MaxSummarySize = 1<<24 - 1

	minFilterLog2 = 6  // 64 bits
	maxFilterLog2 = 16 // 8 KiB
	maxKeys       = 256
	maxValues     = 64
	maxValueBytes = 4 << 10
	maxKeyLen     = 1 << 10
)

// Summary is what a segment's summary says of its records. Every answer is
// "no record can match" (false) or "some may" (true); a nil *Summary says
// "some may" to everything. It is safe for concurrent use.
type Summary struct {
	blocks  []blockFilter
	keys    map[string]*keySet
	allKeys bool
	size    int // bytes in the segment
}

// keySet is what a summary says of one header key's values.
type keySet struct {
	values map[string]struct{} // nil when many
}

// blockFilter is what a summary says of one block.
type blockFilter struct {
	flags uint8
	hdr   []byte
	grams []byte
}

// Blocks returns the number of blocks the summary describes: those of the
// segment's footer.
func (s *Summary) Blocks() int {
	if s == nil {
		return 0
	}
	return len(s.blocks)
}

// Size returns the summary's size in the segment, in bytes.
func (s *Summary) Size() int {
	if s == nil {
		return 0
	}
	return s.size
}

// Values returns the values header key takes in the segment's records, when
// the summary lists them all (exact); exact is false when it does not know
// them (too many, or not recorded), and present reports whether any record
// may have the key at all.
func (s *Summary) Values(key string) (values []string, exact, present bool) {
	if s == nil {
		return nil, false, true
	}
	ks, ok := s.keys[key]
	if !ok {
		return nil, s.allKeys, !s.allKeys
	}
	if ks.values == nil {
		return nil, false, true
	}
	for v := range ks.values {
		values = append(values, v)
	}
	return values, true, true
}

// MayHaveKey reports whether a record of the segment may have header key.
func (s *Summary) MayHaveKey(key string) bool {
	if s == nil || !s.allKeys {
		return true
	}
	_, ok := s.keys[key]
	return ok
}

// MayHave reports whether a record of the segment may have header key with
// value.
func (s *Summary) MayHave(key, value string) bool {
	if s == nil {
		return true
	}
	if ks, ok := s.keys[key]; ok {
		if ks.values != nil {
			_, ok := ks.values[value]
			return ok
		}
	} else if s.allKeys {
		return false
	}
	h := pairHash(key, value, true)
	for i := range s.blocks {
		if s.blocks[i].mayHaveHash(h) {
			return true
		}
	}
	return false
}

// BlockMayHaveKey reports whether a record of block i (of the footer's
// index) may have header key.
func (s *Summary) BlockMayHaveKey(i int, key string) bool {
	if !s.MayHaveKey(key) {
		return false
	}
	if s == nil || i < 0 || i >= len(s.blocks) {
		return true
	}
	return s.blocks[i].mayHaveHash(pairHash(key, "", false))
}

// BlockMayHave reports whether a record of block i (of the footer's index)
// may have header key with value.
func (s *Summary) BlockMayHave(i int, key, value string) bool {
	if s == nil {
		return true
	}
	if ks, ok := s.keys[key]; ok {
		if ks.values != nil {
			if _, ok := ks.values[value]; !ok {
				return false
			}
		}
	} else if s.allKeys {
		return false
	}
	if i < 0 || i >= len(s.blocks) {
		return true
	}
	return s.blocks[i].mayHaveHash(pairHash(key, value, true))
}

// BlockMayContain reports whether a payload of block i may contain text.
// With jsonValue, text is the text of a JSON value that a payload's JSON is
// to hold (a string's, unescaped, or a number's): a block whose payloads
// hold escapes may hold it without its text, and so may match. Texts
// shorter than three bytes may match anything.
func (s *Summary) BlockMayContain(i int, text []byte, jsonValue bool) bool {
	if s == nil || i < 0 || i >= len(s.blocks) || len(text) < 3 {
		return true
	}
	b := &s.blocks[i]
	if b.grams == nil || jsonValue && b.flags&filtEscapes != 0 {
		return true
	}
	shift := 33 - bitsLen(len(b.grams)*8)
	for i := 0; i+3 <= len(text); i++ {
		if j := gramHash(trigram(text[i:])) >> shift; b.grams[j>>3]&(1<<(j&7)) == 0 {
			return false
		}
	}
	return true
}

// hdrHashes is the number of hash functions of a header filter.
const hdrHashes = 6

// mayHaveHash tests a pairHash against the block's header filter.
func (b *blockFilter) mayHaveHash(h uint64) bool {
	if b.hdr == nil {
		return true
	}
	m := uint64(len(b.hdr) * 8)
	h1, h2 := uint64(uint32(h)), uint64(uint32(h>>32)|1)
	for k := range uint64(hdrHashes) {
		j := (h1 + k*h2) % m
		if b.hdr[j>>3]&(1<<(j&7)) == 0 {
			return false
		}
	}
	return true
}

// setHeaderBits sets the bits of a pairHash in header filter f.
func setHeaderBits(f []byte, h uint64) {
	m := uint64(len(f) * 8)
	h1, h2 := uint64(uint32(h)), uint64(uint32(h>>32)|1)
	for k := range uint64(hdrHashes) {
		j := (h1 + k*h2) % m
		f[j>>3] |= 1 << (j & 7)
	}
}

// pairHash hashes a header key (withValue false) or a key and its value
// (FNV-1a, 64 bits), for the header filters.
func pairHash[T string | []byte](key, value T, withValue bool) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	if !withValue {
		return (h ^ 0xfe) * prime
	}
	h = (h ^ 0xff) * prime
	for i := 0; i < len(value); i++ {
		h = (h ^ uint64(value[i])) * prime
	}
	return h
}

// gramHash hashes three bytes, t = b0 | b1<<8 | b2<<16 (trigram), for
// the n-gram filters (Fibonacci hashing): a filter of 2^l bits sets bit
// gramHash(t) >> (32-l), the hash's top l bits.
func gramHash(t uint32) uint32 { return t * 0x9E3779B1 }

// trigram returns the first three bytes of b as gramHash takes them.
func trigram(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 }

// parseSummary parses a summary section b, of a segment with blocks blocks;
// open, when set, opens a sealed body (nil: a sealed summary is an error
// wrapping ErrNoKey). Every length is checked against the bytes that remain
// before anything is allocated; what it allocates is bounded by len(b). The
// Summary's filters point into b. Errors are plain, for the caller to wrap.
func parseSummary(b []byte, blocks int, open func(aad, sealed []byte, counter uint32) ([]byte, error)) (*Summary, error) {
	le := binary.LittleEndian
	if len(b) < sumFixed+4 {
		return nil, fmt.Errorf("summary of %d bytes is too short", len(b))
	}
	if got, want := le.Uint32(b[len(b)-4:]), crc32.Checksum(b[:len(b)-4], castag); got != want {
		return nil, fmt.Errorf("summary checksum %08x, want %08x", got, want)
	}
	if le.Uint32(b) != sumMagic {
		return nil, fmt.Errorf("bad summary magic")
	}
	if v := b[4]; v != sumVersion {
		return nil, fmt.Errorf("summary version %d, this reader knows %d", v, sumVersion)
	}
	flags := b[5]
	if flags&^sumSealed != 0 {
		return nil, fmt.Errorf("summary flags %#x", flags)
	}
	if flags&sumSealed == 0 && le.Uint32(b[8:]) != 0 {
		return nil, fmt.Errorf("summary has a nonce counter and is not sealed")
	}
	if n := le.Uint32(b[12:]); int64(n) != int64(len(b)-sumFixed-4) {
		return nil, fmt.Errorf("summary body of %d bytes in %d", n, len(b))
	}
	body := b[sumFixed : len(b)-4]
	if flags&sumSealed != 0 {
		if open == nil {
			return nil, fmt.Errorf("%w: the summary is sealed", ErrNoKey)
		}
		var err error
		if body, err = open(b[:sumFixed], body, le.Uint32(b[8:])); err != nil {
			return nil, err
		}
	}
	s, err := parseBody(body, blocks)
	if err != nil {
		return nil, err
	}
	s.size = len(b)
	return s, nil
}

// sumReader reads a summary's body, every length checked.
type sumReader struct {
	b   []byte
	err error
}

func (r *sumReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *sumReader) byte1(what string) uint8 {
	if r.err != nil || len(r.b) < 1 {
		r.fail("summary ends in %s", what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *sumReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("summary: bad %s", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *sumReader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("summary: %s of %d bytes exceeds the %d left", what, n, len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *sumReader) str(max int, what string) string {
	n := r.uvarint(what)
	if r.err == nil && n > uint64(max) {
		r.fail("summary: %s of %d bytes, at most %d", what, n, max)
		return ""
	}
	return string(r.bytes(n, what))
}

func (r *sumReader) filter(what string) []byte {
	l := r.byte1(what)
	if r.err == nil && (l < minFilterLog2 || l > maxFilterLog2) {
		r.fail("summary: %s of 2^%d bits", what, l)
		return nil
	}
	return r.bytes(uint64(1)<<l/8, what)
}

// parseBody parses a summary's plain body.
func parseBody(b []byte, blocks int) (*Summary, error) {
	r := &sumReader{b: b}
	n := r.uvarint("block count")
	if r.err == nil && n != uint64(blocks) {
		return nil, fmt.Errorf("summary of %d blocks, the footer lists %d", n, blocks)
	}
	flags := r.byte1("flags")
	if r.err == nil && flags&^sumAllKeys != 0 {
		r.fail("summary: body flags %#x", flags)
	}
	s := &Summary{allKeys: flags&sumAllKeys != 0}
	nk := r.uvarint("key count")
	if r.err == nil && nk > maxKeys {
		r.fail("summary: %d keys, at most %d", nk, maxKeys)
	}
	if r.err == nil {
		s.keys = make(map[string]*keySet, nk)
	}
	for i := uint64(0); i < nk && r.err == nil; i++ {
		name := r.str(maxKeyLen, "key")
		ks := &keySet{}
		switch kind := r.byte1("key kind"); {
		case r.err != nil:
		case kind == keyExact:
			nv := r.uvarint("value count")
			if r.err == nil && nv > maxValues {
				r.fail("summary: key %q has %d values, at most %d", name, nv, maxValues)
				break
			}
			ks.values = make(map[string]struct{}, nv)
			for range nv {
				ks.values[r.str(maxValueBytes, "value")] = struct{}{}
			}
		case kind == keyMany:
		default:
			r.fail("summary: key %q of kind %d", name, kind)
		}
		if _, dup := s.keys[name]; dup && r.err == nil {
			r.fail("summary: key %q twice", name)
		}
		if r.err == nil {
			s.keys[name] = ks
		}
	}
	// Every block takes at least a byte: n is bounded by the body.
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("summary: %d blocks in %d bytes", n, len(r.b))
	}
	if r.err == nil {
		s.blocks = make([]blockFilter, n)
	}
	for i := range s.blocks {
		f := &s.blocks[i]
		f.flags = r.byte1("block filters")
		if r.err == nil && f.flags&^(filtEscapes|filtHeaders|filtGrams) != 0 {
			r.fail("summary: block %d filter flags %#x", i, f.flags)
		}
		if f.flags&filtHeaders != 0 {
			n := r.uvarint("header filter length")
			if r.err == nil && (n < 1<<minFilterLog2/8 || n > 1<<maxFilterLog2/8) {
				r.fail("summary: a header filter of %d bytes", n)
			}
			f.hdr = r.bytes(n, "header filter")
		}
		if f.flags&filtGrams != 0 {
			f.grams = r.filter("n-gram filter")
		}
		if r.err != nil {
			break
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("summary: %d bytes after the last block", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}

// popcount counts the bits set in b.
func popcount(b []byte) int {
	n := 0
	for len(b) >= 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for _, c := range b {
		n += bits.OnesCount8(c)
	}
	return n
}

// Summary returns the segment's summary: nil and no error when it has none
// (written without one, unsealed, or written before summaries). A damaged
// summary is a *CorruptError (Block -1); the summary of an encrypted
// segment read without its key is an error wrapping ErrNoKey. Either way a
// caller reads the segment as if it had none: a summary only ever lets a
// reader skip. It is read once, and kept: taken from what the Reader read
// with its footer (a small segment is read whole), or else with one read of
// its bytes; the Summary stays valid when the Reader is done with.
func (r *Reader) Summary() (*Summary, error) {
	if r.sumDone {
		return r.sum, r.sumErr
	}
	r.sumDone = true
	r.sum, r.sumErr = r.readSummary()
	return r.sum, r.sumErr
}

func (r *Reader) readSummary() (*Summary, error) {
	ft := r.footer
	if ft == nil || ft.SummaryBytes == 0 {
		return nil, nil
	}
	b := make([]byte, ft.SummaryBytes) // checked against the segment's size by readFooter
	if r.end >= r.winOff && r.end+ft.SummaryBytes <= r.winOff+int64(len(r.win)) {
		// Read with the footer (a small segment is read whole at once).
		copy(b, r.win[r.end-r.winOff:])
	} else if got, err := r.src.ReadAt(b, r.end); int64(got) < ft.SummaryBytes {
		return nil, r.ioError(r.end, len(b), err)
	}
	var open func(aad, sealed []byte, counter uint32) ([]byte, error)
	if r.seal != nil {
		open = func(aad, sealed []byte, counter uint32) ([]byte, error) {
			out, err := r.seal.open(nil, aad, sealed, counter)
			if err != nil {
				return nil, errors.New("sealed summary fails authentication")
			}
			return out, nil
		}
	}
	s, err := parseSummary(b, len(ft.Blocks), open)
	if errors.Is(err, ErrNoKey) {
		return nil, &NoKeyError{Segment: r.name, Detail: "its summary is sealed"}
	}
	if err != nil {
		return nil, r.corrupt(r.end, -1, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	return s, nil
}

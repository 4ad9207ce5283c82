package segment

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
)

// Building summaries (see summary.go for what they hold): each block is
// summarized from its raw records where it is compressed (EncodedBlock.
// Summarize: a dumper's compressor goroutines, or the Writer's record-level
// API), and the Writer gathers the blocks' summaries and writes the
// segment's before its footer.

// gramFill is the share of bits set an n-gram filter is folded down to at
// most: a filter is built at 2^maxFilterLog2 bits and halved (its halves
// ORed) while the result has at most this share set. A text of n bytes
// tests n-2 bits, so even a filter this full rarely lets a block whose
// payloads lack the text through: 0.4^7 < 0.2% for 9 bytes.
const gramFill = 0.4

// gramUseless is the share of bits set beyond which an n-gram filter is
// not kept: one of random or binary payloads, which lets almost any text
// through.
const gramUseless = 0.85

// hdrBitsPerItem sizes a header filter: with 6 hash functions, 16 bits per
// distinct key and value give about 0.1% false positives, so that a value
// unique to one record (an order ID) lets few of a segment's hundreds of
// blocks through.
const hdrBitsPerItem = 16

// blockSum is the summary of one block: its filters, and its header keys
// for the segment's.
type blockSum struct {
	blockFilter
	valid    bool
	keys     []keyVals // the block's header keys, with their values while few
	overflow bool      // some key is not in keys
}

// keyVals is a header key of a block and its values, nil once many.
type keyVals struct {
	key    string
	values []string
	bytes  int
	many   bool
}

// summarizer is the scratch memory of a block's summary, pooled.
type summarizer struct {
	seen  hashSet
	grams [1 << maxFilterLog2 / 64]uint64
}

var summarizers = sync.Pool{New: func() any { return new(summarizer) }}

// hashSet is a set of non-zero 64-bit hashes (open addressing), in the
// order added.
type hashSet struct {
	slots  []uint64
	hashes []uint64
}

func (s *hashSet) reset() {
	clear(s.slots)
	s.hashes = s.hashes[:0]
}

// add adds h (0 is taken as 1).
func (s *hashSet) add(h uint64) {
	h |= boolBit(h == 0)
	if 2*(len(s.hashes)+1) > len(s.slots) {
		old := s.hashes
		s.slots = make([]uint64, max(64, 4*len(s.slots)))
		s.hashes = s.hashes[:0]
		for _, o := range old {
			s.insert(o)
		}
	}
	s.insert(h)
}

func (s *hashSet) insert(h uint64) {
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return
		case 0:
			s.slots[i] = h
			s.hashes = append(s.hashes, h)
			return
		}
	}
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Summarize records what a segment's summary (WriterOptions.Summarize)
// needs of the block's records: call it after Compressor.Encode, with the
// BlockBuilder given to Encode, before Writer.WriteBlock. A block not
// summarized leaves its segment without a summary. It reuses e's storage.
func (e *EncodedBlock) Summarize(b *BlockBuilder) {
	e.sum.build(b.raw, int(b.count))
}

// build summarizes count records in raw; a record that does not parse (it
// cannot: the raw bytes are a BlockBuilder's) leaves the summary invalid.
func (s *blockSum) build(raw []byte, count int) {
	s.valid, s.flags, s.overflow = false, 0, false
	for i := range s.keys {
		s.keys[i] = keyVals{}
	}
	s.keys = s.keys[:0]
	sm := summarizers.Get().(*summarizer)
	defer summarizers.Put(sm)
	sm.seen.reset()
	clear(sm.grams[:])
	grams := &sm.grams
	b := raw
	for range count {
		p, rest, err := parseRecord(b)
		if err != nil {
			return
		}
		b = rest
		hb := p.hdr
		for range p.nh {
			k, v, r := nextHeader(hb)
			hb = r
			if s.addValue(k, v) {
				sm.seen.add(pairHash(k, nil, false)) // a new key
			}
			sm.seen.add(pairHash(k, v, true))
		}
		pl := p.payload
		if s.flags&filtEscapes == 0 && bytes.IndexByte(pl, '\\') >= 0 {
			s.flags |= filtEscapes
		}
		if len(pl) < 3 {
			continue
		}
		addGrams(grams, pl)
	}
	if len(b) != 0 {
		return
	}
	if hashes := sm.seen.hashes; len(hashes) > 0 {
		s.flags |= filtHeaders
		// A multiple of 64 bits, not of a power of two: a hash is
		// taken modulo the size, and halving (ORing the halves) keeps
		// every bit where the half's modulo finds it.
		n := min(max((len(hashes)*hdrBitsPerItem+63)/64*64, 1<<minFilterLog2), 1<<maxFilterLog2)
		s.hdr = slices.Grow(s.hdr[:0], n/8)[:n/8]
		clear(s.hdr)
		for _, h := range hashes {
			setHeaderBits(s.hdr, h)
		}
	} else {
		s.hdr = s.hdr[:0]
	}
	s.grams = slices.Grow(s.grams[:0], len(grams)*8)
	for _, w := range grams {
		s.grams = binary.LittleEndian.AppendUint64(s.grams, w)
	}
	s.grams = fold(s.grams, gramFill)
	if float64(popcount(s.grams)) <= gramUseless*float64(len(s.grams)*8) {
		s.flags |= filtGrams
	} else {
		s.grams = s.grams[:0] // binary or random payloads: it would let everything through
	}
	s.valid = true
}

// addGrams sets the bits of the trigrams of p in an unfolded n-gram filter:
// six at a time from one 8-byte load, the rest one by one.
func addGrams(grams *[1 << maxFilterLog2 / 64]uint64, p []byte) {
	const shift = 32 - maxFilterLog2
	i := 0
	for ; i+8 <= len(p); i += 6 {
		x := binary.LittleEndian.Uint64(p[i:])
		j0 := gramHash(uint32(x)&0xffffff) >> shift
		j1 := gramHash(uint32(x>>8)&0xffffff) >> shift
		j2 := gramHash(uint32(x>>16)&0xffffff) >> shift
		j3 := gramHash(uint32(x>>24)&0xffffff) >> shift
		j4 := gramHash(uint32(x>>32)&0xffffff) >> shift
		j5 := gramHash(uint32(x>>40)&0xffffff) >> shift
		grams[j0>>6] |= 1 << (j0 & 63)
		grams[j1>>6] |= 1 << (j1 & 63)
		grams[j2>>6] |= 1 << (j2 & 63)
		grams[j3>>6] |= 1 << (j3 & 63)
		grams[j4>>6] |= 1 << (j4 & 63)
		grams[j5>>6] |= 1 << (j5 & 63)
	}
	for ; i+3 <= len(p); i++ {
		j := gramHash(trigram(p[i:])) >> shift
		grams[j>>6] |= 1 << (j & 63)
	}
}

// addValue records a header key and value of the block; newKey reports that
// the key was not seen in the block before (or is left out: too many keys,
// or too long).
func (s *blockSum) addValue(k, v []byte) (newKey bool) {
	var kv *keyVals
	for i := range s.keys {
		if s.keys[i].key == string(k) {
			kv = &s.keys[i]
			break
		}
	}
	if kv == nil {
		newKey = true
		if len(s.keys) >= maxKeys || len(k) > maxKeyLen {
			s.overflow = true
			return newKey
		}
		s.keys = append(s.keys, keyVals{key: string(k)})
		kv = &s.keys[len(s.keys)-1]
	}
	if kv.many {
		return newKey
	}
	for _, have := range kv.values {
		if have == string(v) {
			return newKey
		}
	}
	if len(kv.values) >= maxValues || kv.bytes+len(v) > maxValueBytes {
		kv.values, kv.many = nil, true
		return newKey
	}
	kv.values = append(kv.values, string(v))
	kv.bytes += len(v)
	return newKey
}

// bitsLen returns the number of bits needed to hold n.
func bitsLen(n int) int {
	l := 0
	for n > 0 {
		l++
		n >>= 1
	}
	return l
}

// fold halves an n-gram filter f while the half has at most fill of its
// bits set and at least 2^minFilterLog2 bits, in place, and returns it (see
// halve).
func fold(f []byte, fill float64) []byte {
	for len(f)*8 > 1<<minFilterLog2 {
		set := 0
		for i := 0; i < len(f); i += 8 {
			w := binary.LittleEndian.Uint64(f[i:])
			set += bits.OnesCount64((w | w>>1) & 0x5555555555555555)
		}
		if float64(set) > fill*float64(len(f)*4) {
			break
		}
		f = halve(f)
	}
	return f
}

// halve returns the n-gram filter f of 2^l bits as one of 2^(l-1), in
// place: its bit i is bit 2i or bit 2i+1 of f, as a filter tested with the
// hash's top l-1 bits must have it. f has at least 64 bits.
func halve(f []byte) []byte {
	le := binary.LittleEndian
	for i := 0; i < len(f); i += 8 {
		x := le.Uint64(f[i:])
		x = (x | x>>1) & 0x5555555555555555
		x = (x | x>>1) & 0x3333333333333333
		x = (x | x>>2) & 0x0F0F0F0F0F0F0F0F
		x = (x | x>>4) & 0x00FF00FF00FF00FF
		x = (x | x>>8) & 0x0000FFFF0000FFFF
		x = (x | x>>16) & 0x00000000FFFFFFFF
		le.PutUint32(f[i/2:], uint32(x)) // i/2+4 <= i for i >= 8: read before written
	}
	return f[:len(f)/2]
}

// halveHeaders returns the header filter f of n bytes as one of n/2, in
// place: a header filter is tested modulo its size, so bit j of the half
// is bit j or bit j+half of f. n is even.
func halveHeaders(f []byte) []byte {
	half := len(f) / 2
	for i := range half {
		f[i] |= f[half+i]
	}
	return f[:half]
}

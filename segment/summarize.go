package segment

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
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

// sumAcc gathers the blocks' summaries of a segment being written. Its
// filters are halved as it goes when they exceed maxSummaryBytes, so that a
// Writer holds at most that much of them.
type sumAcc struct {
	blocks   []blockFilter
	keys     map[string]*accKey
	overflow bool // a key was left out: the keys are not all listed
	broken   bool // a block came without a summary: write none
	// The size of the body so far, but for its block and key counts.
	filterBytes int
	keyBytes    int
}

// maxSummaryBytes bounds a summary: a Writer folds its filters to stay
// within it, and a reader of a summary holds at most that much of it.
const maxSummaryBytes = 4 << 20

type accKey struct {
	values map[string]struct{}
	bytes  int
	many   bool
}

// valueBytes is what the key's values take in the body: their count and,
// each, its length and bytes (at most 2 bytes of length: values are at
// most maxValueBytes).
func (k *accKey) valueBytes() int {
	if k.many {
		return 0
	}
	return uvarintLen(uint64(len(k.values))) + 2*len(k.values) + k.bytes
}

// size returns an upper bound of the size of the summary's section as it
// would be encoded now (before any folding to a budget), with one more
// block of the given summary (nil: none).
func (a *sumAcc) size(next *blockSum, sealed bool) int {
	n, blocks, keys := a.filterBytes+a.keyBytes, len(a.blocks), len(a.keys)
	if next != nil {
		n += next.size()
		blocks++
		keys += len(next.keys) // a bound: keys new to the segment
		for i := range next.keys {
			n += 2*uvarintLen(uint64(len(next.keys[i].key))) + len(next.keys[i].key) + 2
			for _, v := range next.keys[i].values {
				n += 2 + len(v)
			}
		}
	}
	n += sumFixed + 4 + uvarintLen(uint64(blocks)) + 1 + uvarintLen(uint64(keys))
	if sealed {
		n += TagSize
	}
	return n
}

// add takes the summary of the next block.
func (a *sumAcc) add(s *blockSum) {
	if !s.valid {
		a.broken = true
		return
	}
	f := blockFilter{flags: s.flags}
	if s.flags&filtHeaders != 0 {
		f.hdr = slices.Clone(s.hdr)
	}
	if s.flags&filtGrams != 0 {
		f.grams = slices.Clone(s.grams)
	}
	a.blocks = append(a.blocks, f)
	a.filterBytes += s.size()
	for a.filterBytes > maxSummaryBytes && a.shrink() {
	}
	if s.overflow {
		a.overflow = true
	}
	if a.keys == nil {
		a.keys = map[string]*accKey{}
	}
	for i := range s.keys {
		kv := &s.keys[i]
		k, ok := a.keys[kv.key]
		if !ok {
			if len(a.keys) >= maxKeys {
				a.overflow = true
				continue
			}
			k = &accKey{values: map[string]struct{}{}}
			a.keys[kv.key] = k
			a.keyBytes += uvarintLen(uint64(len(kv.key))) + len(kv.key) + 1 + 1
		}
		if k.many {
			continue
		}
		if kv.many {
			a.keyBytes -= k.valueBytes()
			k.values, k.many = nil, true
			continue
		}
		for _, v := range kv.values {
			if _, ok := k.values[v]; ok {
				continue
			}
			if len(k.values) >= maxValues || k.bytes+len(v) > maxValueBytes {
				a.keyBytes -= k.valueBytes()
				k.values, k.many = nil, true
				break
			}
			a.keyBytes -= k.valueBytes()
			k.values[v] = struct{}{}
			k.bytes += len(v)
			a.keyBytes += k.valueBytes()
		}
	}
}

// truncate forgets the summaries of the blocks after the first n. The keys
// and values of those blocks stay: a summary may list more than there is.
func (a *sumAcc) truncate(n int) {
	for i := n; i < len(a.blocks); i++ {
		a.filterBytes -= a.blocks[i].size()
	}
	clear(a.blocks[n:])
	a.blocks = a.blocks[:n]
}

// encode returns the summary's section, its body sealed by seal when set
// (the segment is encrypted). Its filters are folded to fit budget bytes;
// when even that is not enough it returns nil: no summary.
func (a *sumAcc) encode(budget int, seal *sealer, counter uint32) []byte {
	if a.broken {
		return nil
	}
	budget = min(budget, MaxSummarySize)
	for {
		body := a.body()
		size := sumFixed + len(body) + 4
		if seal != nil {
			size += TagSize
		}
		if size <= budget {
			return a.section(body, seal, counter)
		}
		if !a.shrink() {
			return nil
		}
	}
}

// shrink makes the summary smaller, saying less, and reports whether
// anything was left to drop: it halves the largest filters of every block,
// n-gram filters first; once they are all at their smallest it lists the
// values of the key with the most no more, then no keys at all, then drops
// the n-gram filters and the header filters.
func (a *sumAcc) shrink() bool {
	for _, grams := range []bool{true, false} {
		largest := 0
		for i := range a.blocks {
			largest = max(largest, len(a.blocks[i].filter(grams)))
		}
		if largest%2 != 0 || largest/2*8 < 1<<minFilterLog2 {
			continue
		}
		for i := range a.blocks {
			b := &a.blocks[i]
			f := b.filter(grams)
			if len(f) != largest {
				continue
			}
			if grams {
				f = halve(f)
			} else {
				f = halveHeaders(f)
			}
			a.filterBytes -= len(f)
			if grams && float64(popcount(f)) > gramUseless*float64(len(f)*8) {
				// Too full to rule anything out: its bytes are
				// better spent on the other filters.
				a.filterBytes -= 1 + len(f)
				b.flags &^= filtGrams
				f = nil
			}
			b.setFilter(grams, f)
		}
		return true
	}
	var most *accKey
	for _, k := range a.keys {
		if !k.many && (most == nil || k.valueBytes() > most.valueBytes()) {
			most = k
		}
	}
	if most != nil {
		a.keyBytes -= most.valueBytes()
		most.values, most.many = nil, true
		return true
	}
	if len(a.keys) > 0 {
		a.keys, a.keyBytes, a.overflow = nil, 0, true
		return true
	}
	for _, flag := range []uint8{filtGrams, filtHeaders} {
		dropped := false
		for i := range a.blocks {
			b := &a.blocks[i]
			if b.flags&flag != 0 {
				a.filterBytes -= b.size()
				b.flags &^= flag
				b.setFilter(flag == filtGrams, nil)
				a.filterBytes += b.size()
				dropped = true
			}
		}
		if dropped {
			return true
		}
	}
	return false
}

// size returns the bytes the block's filters take in the summary's body.
func (b *blockFilter) size() int {
	n := 1
	if b.flags&filtHeaders != 0 {
		n += uvarintLen(uint64(len(b.hdr))) + len(b.hdr)
	}
	if b.flags&filtGrams != 0 {
		n += 1 + len(b.grams)
	}
	return n
}

func (b *blockFilter) filter(grams bool) []byte {
	if grams {
		return b.grams
	}
	return b.hdr
}

func (b *blockFilter) setFilter(grams bool, f []byte) {
	if grams {
		b.grams = f
	} else {
		b.hdr = f
	}
}

// body encodes the summary's body.
func (a *sumAcc) body() []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(a.blocks)))
	var flags uint8
	if !a.overflow {
		flags |= sumAllKeys
	}
	b = append(b, flags)
	names := make([]string, 0, len(a.keys))
	for k := range a.keys {
		names = append(names, k)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		k := a.keys[name]
		b = appendStr(b, name)
		if k.many {
			b = append(b, keyMany)
			continue
		}
		b = append(b, keyExact)
		vals := make([]string, 0, len(k.values))
		for v := range k.values {
			vals = append(vals, v)
		}
		slices.Sort(vals)
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			b = appendStr(b, v)
		}
	}
	for i := range a.blocks {
		f := &a.blocks[i]
		b = append(b, f.flags)
		if f.flags&filtHeaders != 0 {
			b = binary.AppendUvarint(b, uint64(len(f.hdr)))
			b = append(b, f.hdr...)
		}
		if f.flags&filtGrams != 0 {
			b = append(b, uint8(bitsLen(len(f.grams)*8-1)))
			b = append(b, f.grams...)
		}
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// section frames a body: the fixed fields, the body (sealed with seal under
// the nonce counter when seal is set), the CRC32C.
func (a *sumAcc) section(body []byte, seal *sealer, counter uint32) []byte {
	le := binary.LittleEndian
	n := len(body)
	var flags uint8
	if seal != nil {
		n += TagSize
		flags |= sumSealed
	}
	out := make([]byte, 0, sumFixed+n+4)
	out = le.AppendUint32(out, sumMagic)
	out = append(out, sumVersion, flags, 0, 0)
	out = le.AppendUint32(out, counter)
	out = le.AppendUint32(out, uint32(n))
	if seal != nil {
		aad := append([]byte(nil), out[:sumFixed]...)
		out = seal.seal(out, aad, body, counter)
	} else {
		out = append(out, body...)
	}
	return le.AppendUint32(out, crc32.Checksum(out, castag))
}

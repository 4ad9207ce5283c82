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

// hdrBitsPerItem sizes a header filter: with 3 hash functions, 8 bits per
// distinct key and value give about 3% false positives.
const hdrBitsPerItem = 8

// blockSum is the summary of one block.
type blockSum struct {
	valid    bool
	flags    uint8
	hdr      []byte
	grams    []byte
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
		t := uint32(pl[0])<<8 | uint32(pl[1])
		for _, c := range pl[2:] {
			t = (t<<8 | uint32(c)) & 0xffffff
			j := gramHash(t) >> (32 - maxFilterLog2)
			grams[j>>6] |= 1 << (j & 63)
		}
	}
	if len(b) != 0 {
		return
	}
	if hashes := sm.seen.hashes; len(hashes) > 0 {
		s.flags |= filtHeaders
		n := max(len(hashes)*hdrBitsPerItem, 1<<minFilterLog2)
		l := min(max(bitsLen(n-1), minFilterLog2), maxFilterLog2)
		s.hdr = slices.Grow(s.hdr[:0], 1<<l/8)[:1<<l/8]
		clear(s.hdr)
		mask := uint32(1<<l - 1)
		for _, h := range hashes {
			h1, h2 := uint32(h), uint32(h>>32)|1
			for k := range uint32(3) {
				j := (h1 + k*h2) & mask
				s.hdr[j>>3] |= 1 << (j & 7)
			}
		}
	} else {
		s.hdr = s.hdr[:0]
	}
	s.grams = slices.Grow(s.grams[:0], len(grams)*8)
	for _, w := range grams {
		s.grams = binary.LittleEndian.AppendUint64(s.grams, w)
	}
	s.grams = fold(s.grams, gramFill)
	s.flags |= filtGrams
	s.valid = true
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

// halveHeaders returns the header filter f of 2^l bits as one of
// 2^(l-1), in place: a header filter is tested with the hash's low bits, so
// bit j of the half is bit j or bit j+half of f.
func halveHeaders(f []byte) []byte {
	half := len(f) / 2
	for i := range half {
		f[i] |= f[half+i]
	}
	return f[:half]
}

// sumAcc gathers the blocks' summaries of a segment being written.
type sumAcc struct {
	blocks   []blockFilter
	keys     map[string]*accKey
	overflow bool // a key was left out: the keys are not all listed
	broken   bool // a block came without a summary: write none
}

type accKey struct {
	values map[string]struct{}
	bytes  int
	many   bool
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
		}
		if k.many {
			continue
		}
		if kv.many {
			k.values, k.many = nil, true
			continue
		}
		for _, v := range kv.values {
			if _, ok := k.values[v]; ok {
				continue
			}
			if len(k.values) >= maxValues || k.bytes+len(v) > maxValueBytes {
				k.values, k.many = nil, true
				break
			}
			k.values[v] = struct{}{}
			k.bytes += len(v)
		}
	}
}

// truncate forgets the summaries of the blocks after the first n. The keys
// and values of those blocks stay: a summary may list more than there is.
func (a *sumAcc) truncate(n int) {
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

// shrink halves the largest filters of every block, n-gram filters first,
// and reports whether anything was left to halve.
func (a *sumAcc) shrink() bool {
	for _, grams := range []bool{true, false} {
		largest := 0
		for i := range a.blocks {
			largest = max(largest, len(a.blocks[i].filter(grams)))
		}
		if largest*8 <= 1<<minFilterLog2 {
			continue
		}
		for i := range a.blocks {
			f := a.blocks[i].filter(grams)
			if len(f) == largest {
				if grams {
					f = halve(f)
				} else {
					f = halveHeaders(f)
				}
				a.blocks[i].setFilter(grams, f)
			}
		}
		return true
	}
	return false
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
			b = append(b, uint8(bitsLen(len(f.hdr)*8-1)))
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

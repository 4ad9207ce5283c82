package segment

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
)

// Gathering the blocks' summaries of a segment being written into the
// segment's summary (see summarize.go for a block's).

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

package segment

import (
	"encoding/binary"
	"iter"
	"slices"
	"time"
)

// Record is one dead letter as read from a segment. Headers and Payload point
// into the memory of the block they were read from, without a copy; Payload
// is capped at its length (a full slice expression), so appending to it
// allocates instead of writing over the next record. How long they stay
// valid depends on how they were read: Reader.Next reuses its memory for the
// next block; Reader.ReadBlock and a Stream give each block fresh memory,
// which is never overwritten (unless StreamOptions.Reuse) and lives as long
// as something refers to it.
type Record struct {
	// Seq is the record's sequence number in its segment, from 0.
	Seq uint64
	// Time is when the record entered the dump (Unix nanoseconds).
	Time int64
	// Headers are the metadata stored beside the payload.
	Headers Headers
	// Payload is the encoded item.
	Payload []byte
}

// When returns the record's time.
func (r *Record) When() time.Time { return time.Unix(0, r.Time).UTC() }

// Headers is a read-only view of a record's headers, as encoded by
// AppendHeaders.
type Headers struct {
	n int
	b []byte // the key/value pairs, without the count
}

// Len returns the number of headers.
func (h Headers) Len() int { return h.n }

// Get returns the value of the header named key.
func (h Headers) Get(key string) (string, bool) {
	b := h.b
	for range h.n {
		k, v, rest := nextHeader(b)
		if string(k) == key {
			return string(v), true
		}
		b = rest
	}
	return "", false
}

// Lookup returns the value of the header named key without copying it: the
// slice points into the block and is capped at its length, like
// Record.Payload.
func (h Headers) Lookup(key string) ([]byte, bool) {
	b := h.b
	for range h.n {
		k, v, rest := nextHeader(b)
		if string(k) == key {
			return v, true
		}
		b = rest
	}
	return nil, false
}

// All iterates over the headers in stored order (sorted by key).
func (h Headers) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		b := h.b
		for range h.n {
			k, v, rest := nextHeader(b)
			if !yield(string(k), string(v)) {
				return
			}
			b = rest
		}
	}
}

// Map returns the headers as a new map, nil when there are none.
func (h Headers) Map() map[string]string {
	if h.n == 0 {
		return nil
	}
	m := make(map[string]string, h.n)
	for k, v := range h.All() {
		m[k] = v
	}
	return m
}

// nextHeader decodes one validated key/value pair.
func nextHeader(b []byte) (k, v, rest []byte) {
	kl, n := binary.Uvarint(b)
	b = b[n:]
	k, b = b[:kl:kl], b[kl:]
	vl, n := binary.Uvarint(b)
	b = b[n:]
	return k, b[:vl:vl], b[vl:]
}

// AppendHeaders appends the encoding of h (its count, then the pairs sorted by
// key) to dst. A nil or empty map encodes as a single zero byte. The result,
// followed by the payload, is a record body for BlockBuilder.Add.
func AppendHeaders(dst []byte, h map[string]string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(h)))
	switch len(h) {
	case 0:
		return dst
	case 1:
		for k, v := range h {
			dst = appendPair(dst, k, v)
		}
		return dst
	}
	var arr [8]string
	keys := arr[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendPair(dst, k, h[k])
	}
	return dst
}

// AppendHeaderPairs appends the encoding of the given key/value pairs, which
// must be sorted by key and unique, to dst. It does not allocate.
func AppendHeaderPairs(dst []byte, kv ...string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(kv)/2))
	for i := 0; i+1 < len(kv); i += 2 {
		dst = appendPair(dst, kv[i], kv[i+1])
	}
	return dst
}

// AppendRecordHeaders appends the encoding of h to dst, like AppendHeaders.
func AppendRecordHeaders(dst []byte, h Headers) []byte {
	dst = binary.AppendUvarint(dst, uint64(h.n))
	return append(dst, h.b...)
}

func appendPair(dst []byte, k, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// BlockBuilder collects records into the raw bytes of one block. The zero
// value is ready to use. It is not safe for concurrent use.
type BlockBuilder struct {
	raw            []byte
	count          uint32
	base, min, max int64
}

// Add appends a record entering the dump at t (Unix nanoseconds) with the
// given body: the encoding of its headers (AppendHeaders) followed by its
// payload.
func (b *BlockBuilder) Add(t int64, body []byte) {
	if b.count == 0 {
		b.base, b.min, b.max = t, t, t
	} else {
		b.min = min(b.min, t)
		b.max = max(b.max, t)
	}
	d := t - b.base
	n := uint64(varintLen(d) + len(body))
	b.raw = binary.AppendUvarint(b.raw, n)
	b.raw = binary.AppendVarint(b.raw, d)
	b.raw = append(b.raw, body...)
	b.count++
}

// RecordSize returns how many raw bytes Add will use for a record with a body
// of bodyLen bytes, at most.
func RecordSize(bodyLen int) int {
	return uvarintLen(uint64(bodyLen+binary.MaxVarintLen64)) + binary.MaxVarintLen64 + bodyLen
}

// Len returns the raw size of the block so far.
func (b *BlockBuilder) Len() int { return len(b.raw) }

// HeaderValues calls fn with the value of header key of each record added
// that has it, in order. The value is only valid during the call.
func (b *BlockBuilder) HeaderValues(key string, fn func(value []byte)) {
	raw := b.raw
	for range b.count {
		p, rest, err := parseRecord(raw)
		if err != nil {
			return // cannot be: the raw bytes are Add's
		}
		raw = rest
		hb := p.hdr
		for range p.nh {
			k, v, r := nextHeader(hb)
			hb = r
			if string(k) == key {
				fn(v)
				break
			}
		}
	}
}

// Count returns the number of records added.
func (b *BlockBuilder) Count() int { return int(b.count) }

// FirstTime returns the time of the first record added (Unix nanoseconds),
// 0 when the block is empty.
func (b *BlockBuilder) FirstTime() int64 { return b.base }

// Reset empties the builder, keeping buf's storage (which may be nil) for the
// raw bytes.
func (b *BlockBuilder) Reset(buf []byte) {
	*b = BlockBuilder{raw: buf[:0]}
}

// Raw returns the raw bytes built so far.
func (b *BlockBuilder) Raw() []byte { return b.raw }

func varintLen(v int64) int {
	ux := uint64(v) << 1
	if v < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

package segment

import (
	"encoding/binary"
	"fmt"
)

// indexStride is how many records apart the offsets a Block keeps are: one
// 4-byte offset every indexStride records, so the index of a block is at
// most 1/12 of its raw bytes (records take at least 3 bytes), whatever the
// number of records, and Block.Record walks at most indexStride-1 records.
const indexStride = 16

// parsedRecord is one record's place in a raw block.
type parsedRecord struct {
	delta   int64
	nh      int
	hdr     []byte
	payload []byte
}

// parseRecord decodes the record at the start of b, checking every length
// against the bytes that remain. It never allocates. The slices it returns
// are capped at their length, so appending to them never writes over the
// bytes that follow.
func parseRecord(b []byte) (rec parsedRecord, rest []byte, err error) {
	bodyLen, n := uvarint(b)
	if n <= 0 {
		return rec, nil, fmt.Errorf("record length: bad varint")
	}
	b = b[n:]
	if bodyLen > uint64(len(b)) {
		return rec, nil, fmt.Errorf("record length %d exceeds the %d bytes left in the block", bodyLen, len(b))
	}
	if bodyLen > MaxRecordSize+binary.MaxVarintLen64 {
		return rec, nil, fmt.Errorf("record length %d exceeds the cap %d", bodyLen, MaxRecordSize)
	}
	body, rest := b[:bodyLen:bodyLen], b[bodyLen:]
	ux, n := uvarint(body)
	if n <= 0 {
		return rec, nil, fmt.Errorf("record time: bad varint")
	}
	d := int64(ux >> 1)
	if ux&1 != 0 {
		d = ^d
	}
	body = body[n:]
	nh, n := uvarint(body)
	if n <= 0 {
		return rec, nil, fmt.Errorf("header count: bad varint")
	}
	body = body[n:]
	// Every header takes at least two bytes.
	if nh > uint64(len(body))/2 {
		return rec, nil, fmt.Errorf("header count %d exceeds the %d bytes of the record", nh, len(body))
	}
	hb := body
	for i := range int(nh) {
		for range 2 { // key, then value
			l, n := uvarint(body)
			if n <= 0 || l > uint64(len(body)-n) {
				return rec, nil, fmt.Errorf("header %d: length exceeds the record", i)
			}
			body = body[n+int(l):]
		}
	}
	h := len(hb) - len(body)
	rec = parsedRecord{
		delta:   d,
		nh:      int(nh),
		hdr:     hb[:h:h],
		payload: body,
	}
	return rec, rest, nil
}

// uvarint is binary.Uvarint with a fast path for one byte.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return binary.Uvarint(b)
}

// checkRecords checks that raw holds exactly the block's Count records, each
// well formed and with a time inside the block's range. With wantIndex it
// appends to index the offset of every indexStride-th record, for Block. It
// does work linear in len(raw) and allocates at most len(raw)/12 bytes, for
// the index.
func checkRecords(raw []byte, info *BlockInfo, base int64, index []uint32, wantIndex bool) ([]uint32, error) {
	count := int(info.Count)
	if count > len(raw)/3 { // checked against RawLen before; raw is RawLen long
		return index, fmt.Errorf("%d records cannot fit in %d bytes", count, len(raw))
	}
	if wantIndex {
		if need := (count + indexStride - 1) / indexStride; cap(index) < need {
			index = make([]uint32, 0, need)
		}
		index = index[:0]
	}
	b := raw
	for i := range count {
		if wantIndex && i%indexStride == 0 {
			index = append(index, uint32(len(raw)-len(b)))
		}
		p, rest, err := parseRecord(b)
		if err != nil {
			return index, fmt.Errorf("record %d: %v", info.FirstSeq+uint64(i), err)
		}
		if t := base + p.delta; t < info.MinTime || t > info.MaxTime {
			return index, fmt.Errorf("record %d: time outside the block's range", info.FirstSeq+uint64(i))
		}
		b = rest
	}
	if len(b) != 0 {
		return index, fmt.Errorf("%d bytes after the last record", len(b))
	}
	return index, nil
}

// recordAt decodes the record that starts at offset start of a block's raw
// bytes, checked by checkRecords, and returns it and the offset where it
// ends. Its slices are capped like parseRecord's.
func recordAt(b []byte, start int) (parsedRecord, int) {
	bodyLen, i := uvarintAt(b, start)
	end := i + int(bodyLen)
	ux, i := uvarintAt(b, i)
	d := int64(ux >> 1)
	if ux&1 != 0 {
		d = ^d
	}
	nh, i := uvarintAt(b, i)
	pay := i
	for range 2 * nh { // keys and values
		l, j := uvarintAt(b, pay)
		pay = j + int(l)
	}
	return parsedRecord{delta: d, nh: int(nh), hdr: b[i:pay:pay], payload: b[pay:end:end]}, end
}

// skipRecord returns the offset where the checked record at start ends.
func skipRecord(b []byte, start int) int {
	bodyLen, i := uvarintAt(b, start)
	return i + int(bodyLen)
}

// uvarintAt decodes the uvarint at b[i:], checked by parseRecord, and
// returns it and the offset after it.
func uvarintAt(b []byte, i int) (uint64, int) {
	if c := b[i]; c < 0x80 {
		return uint64(c), i + 1
	}
	v, n := binary.Uvarint(b[i:])
	return v, i + n
}

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

// uvarint is binary.Uvarint with an inlined fast path for one byte.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return uvarintSlow(b)
}

// uvarintSlow is binary.Uvarint, kept out of line so that its callers here
// inline.
//
//go:noinline
func uvarintSlow(b []byte) (uint64, int) { return binary.Uvarint(b) }

// checkRecords checks that raw holds exactly the block's Count records, each
// well formed and with a time inside the block's range. With wantIndex it
// appends to index the offset of every indexStride-th record, for Block. It
// does work linear in len(raw) and allocates at most len(raw)/12 bytes, for
// the index. The loop is parseRecord's checks on offsets; a record that
// fails them is parsed again by parseRecord to say what is wrong.
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
	minT, maxT := info.MinTime, info.MaxTime
	pos := 0
	for i := range count {
		if wantIndex && i%indexStride == 0 {
			index = append(index, uint32(pos))
		}
		bodyLen, p := readUvarint(raw, pos)
		if p < 0 || bodyLen > uint64(len(raw)-p) || bodyLen > MaxRecordSize+binary.MaxVarintLen64 {
			return index, recordError(raw[pos:], info, i)
		}
		end := p + int(bodyLen)
		body := raw[:end] // the varints below must end inside the record
		ux, p := readUvarint(body, p)
		if p < 0 {
			return index, recordError(raw[pos:], info, i)
		}
		if t := base + (int64(ux>>1) ^ -int64(ux&1)); t < minT || t > maxT {
			return index, fmt.Errorf("record %d: time outside the block's range", info.FirstSeq+uint64(i))
		}
		var nh uint64
		if p < end && body[p] < 0x80 {
			nh, p = uint64(body[p]), p+1
		} else if nh, p = readUvarint(body, p); p < 0 {
			return index, recordError(raw[pos:], info, i)
		}
		if nh > uint64(end-p)/2 {
			return index, recordError(raw[pos:], info, i)
		}
		for range 2 * int(nh) { // keys and values
			var l uint64
			if p < end && body[p] < 0x80 {
				l, p = uint64(body[p]), p+1
			} else if l, p = readUvarint(body, p); p < 0 {
				return index, recordError(raw[pos:], info, i)
			}
			if l > uint64(end-p) {
				return index, recordError(raw[pos:], info, i)
			}
			p += int(l)
		}
		pos = end
	}
	if pos != len(raw) {
		return index, fmt.Errorf("%d bytes after the last record", len(raw)-pos)
	}
	return index, nil
}

// recordError says what is wrong with the record at the start of b, the i-th
// of the block, which checkRecords found damaged.
func recordError(b []byte, info *BlockInfo, i int) error {
	_, _, err := parseRecord(b)
	if err == nil {
		err = fmt.Errorf("malformed")
	}
	return fmt.Errorf("record %d: %v", info.FirstSeq+uint64(i), err)
}

// recordAt decodes the record that starts at offset start of a block's raw
// bytes, checked by checkRecords, and returns it and the offset where it
// ends. Its slices are capped like parseRecord's.
func recordAt(b []byte, start int) (parsedRecord, int) {
	bodyLen, i := uvarintAt(b, start)
	end := i + int(bodyLen)
	ux, i := uvarintAt(b, i)
	nh, i := uvarintAt(b, i)
	pay := i
	for range 2 * nh { // keys and values
		if c := b[pay]; c < 0x80 {
			pay += 1 + int(c)
		} else {
			l, j := readUvarint(b, pay)
			pay = j + int(l)
		}
	}
	return parsedRecord{delta: int64(ux>>1) ^ -int64(ux&1), nh: int(nh), hdr: b[i:pay:pay], payload: b[pay:end:end]}, end
}

// skipRecord returns the offset where the checked record at start ends.
func skipRecord(b []byte, start int) int {
	bodyLen, i := uvarintAt(b, start)
	return i + int(bodyLen)
}

// uvarintAt decodes the uvarint at b[i:], checked by checkRecords, and
// returns it and the offset after it.
func uvarintAt(b []byte, i int) (uint64, int) {
	if c := b[i]; c < 0x80 {
		return uint64(c), i + 1
	}
	return readUvarint(b, i)
}

// readUvarint decodes the uvarint at b[i:] and returns it and the offset
// after it, or a negative offset when it is not a valid uvarint inside b.
func readUvarint(b []byte, i int) (uint64, int) {
	if i < 0 || i >= len(b) {
		return 0, -1
	}
	if c := b[i]; c < 0x80 {
		return uint64(c), i + 1
	}
	if i+1 < len(b) {
		if c := b[i+1]; c < 0x80 {
			return uint64(b[i]&0x7f) | uint64(c)<<7, i + 2
		}
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

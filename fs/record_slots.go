package fs

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/dlqdump/dlqdump/sink"
)

// A record file holds a record in one of two slots, so that replacing it is
// one write into the file in place, into the slot that does not hold it (a
// checkpoint per block of a restore: a new file and a rename per write cost
// ~6x more on ext4):
//
//	file:  header (32 bytes) at 0 | slot 0 at 4 KiB | slot 1 at 72 KiB
//	header: "DLQ2" | 4 zero bytes | next [16]byte | crc32c uint32 | 4 zero bytes
//	slot:   "DLQR" | seq uint64 | len uint32 | crc32c uint32 | data[len]
//
// The header is written once, when the file is made, and names the file's
// successor (records.go): NAME.claim@hex(next). A slot's CRC32C covers seq,
// len and the data. The record is the whole slot with the higher seq; a slot
// of length 0 is a tombstone: the record was removed. A write goes to the
// other slot, so a write torn by a crash or a full disk leaves the previous
// record whole (a record may go back one version, which makes a restorer
// repeat work, never skip it). Every record fits a slot (sink.MaxRecordSize);
// the file is sparse, a few pages on disk.
//
// Files written by earlier versions ("legacy") have no header: slot 0 at 0
// and slot 1 at 16 KiB, a record larger than 16 KiB - 20 whole in slot 0;
// or, older still, the record's bytes alone. They are read, never written in
// place: the first write makes a successor (records.go). Versions before the
// header read a file with one as a damaged record: they take its claim over
// after a lease and restore its segment from the start. Stop every restorer
// on a directory before going back to one.

const (
	headerMagic = "DLQ2"
	headerSize  = 32
	// idSize is the size of the random id naming a file's successor.
	idSize = 16

	slotMagic      = "DLQR"
	slotHeaderSize = 20
	// slotPeek is what a read takes of each slot first: the whole of a
	// record of a few KiB.
	slotPeek = 8 << 10
)

// layout says where the slots of a record file are. Part of the format:
// never derived from constants that may change.
type layout struct {
	base, stride int64
	// max is the largest record slot 0 holds without covering slot 1.
	max int
	// tombstones: a slot of length 0 is a removed record.
	tombstones bool
}

var (
	// current is the layout of files with a header.
	current = layout{base: 4 << 10, stride: 68 << 10, max: sink.MaxRecordSize, tombstones: true}
	// legacy is the layout of files without one.
	legacy = layout{base: 0, stride: 16 << 10, max: 16<<10 - slotHeaderSize}
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// peekPool holds the buffers slots are read into (a slot's record is copied
// out): a checkpoint per block of a restore would otherwise allocate one,
// whose first touch costs page faults when the heap is growing.
// They hold the header too, with slot 0.
var peekPool = sync.Pool{New: func() any { b := make([]byte, 4<<10+slotPeek); return &b }}

// errRecordBusy means a record was written so often while it was read that
// no read saw both slots unchanged.
var errRecordBusy = errors.New("record rewritten during every read")

// slot is one slot of a record file.
type slot struct {
	index int // 0 or 1
	seq   uint64
	data  []byte // nil for a tombstone
}

// appendHeader appends a file header naming the successor next.
func appendHeader(dst []byte, next [idSize]byte) []byte {
	dst = append(dst, headerMagic...)
	dst = append(dst, 0, 0, 0, 0)
	dst = append(dst, next[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[len(dst)-24:], castagnoli))
	return append(dst, 0, 0, 0, 0)
}

// parseHeader returns the successor id of a file starting with b; ok is false
// for a file without a valid header (legacy, or damaged).
func parseHeader(b []byte) (next [idSize]byte, ok bool) {
	if len(b) < headerSize || string(b[:4]) != headerMagic {
		return next, false
	}
	if crc32.Checksum(b[:24], castagnoli) != binary.LittleEndian.Uint32(b[24:]) {
		return next, false
	}
	copy(next[:], b[8:24])
	return next, true
}

// appendSlot appends the slot holding data (nil: a tombstone) with sequence
// number seq.
func appendSlot(dst []byte, seq uint64, data []byte) []byte {
	dst = append(dst, slotMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(data)))
	crc := crc32.Update(0, castagnoli, dst[len(dst)-12:])
	crc = crc32.Update(crc, castagnoli, data)
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	return append(dst, data...)
}

// writeSlot writes data (nil: a tombstone) into slot index of f with
// sequence number seq.
func writeSlot(f io.WriterAt, lay layout, index int, seq uint64, data []byte) error {
	b := appendSlot(make([]byte, 0, slotHeaderSize+len(data)), seq, data)
	_, err := f.WriteAt(b, lay.base+int64(index)*lay.stride)
	return err
}

// readSlot reads slot index of f into buf, and its header bytes (as read,
// whole or not) into head; ok is false when it holds no whole record.
// With pre set, its bytes are what a read of the slot returned already.
func readSlot(f io.ReaderAt, lay layout, index int, buf, pre []byte, head *[slotHeaderSize]byte) (s slot, ok bool, err error) {
	off := lay.base + int64(index)*lay.stride
	b := pre
	if b == nil {
		n, err := f.ReadAt(buf[:slotPeek], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return slot{}, false, err
		}
		b = buf[:n]
	}
	clear(head[:])
	copy(head[:], b) // zeros past the end of the file, as changed reads them
	if len(b) < slotHeaderSize || string(b[:4]) != slotMagic {
		return slot{}, false, nil
	}
	size := binary.LittleEndian.Uint32(b[12:])
	if (size == 0 && !lay.tombstones) || size > sink.MaxRecordSize {
		return slot{}, false, nil
	}
	want := slotHeaderSize + int(size)
	if want > len(b) {
		full := make([]byte, want)
		if n, err := f.ReadAt(full, off); n < want {
			if err == nil || errors.Is(err, io.EOF) {
				return slot{}, false, nil
			}
			return slot{}, false, err
		}
		b = full
	}
	crc := crc32.Update(0, castagnoli, b[4:16])
	crc = crc32.Update(crc, castagnoli, b[slotHeaderSize:want])
	if crc != binary.LittleEndian.Uint32(b[16:]) {
		return slot{}, false, nil
	}
	s = slot{index: index, seq: binary.LittleEndian.Uint64(b[4:])}
	if size > 0 {
		s.data = make([]byte, size)
		copy(s.data, b[slotHeaderSize:want])
	}
	return s, true, nil
}

// readSlots returns the newest whole slot of f; ok is false when it has
// none. stable tells that no write into f can happen during the read (the
// caller holds its lock, or nobody writes files of its layout any more);
// otherwise both slot headers are read again after the slots and the read
// repeated if one changed, so that a read never returns a record older than
// one it could have seen before (slot 0 read, then two writes, then slot 1
// torn). pre, when set, is what a read of slot 0 returned already.
func readSlots(f io.ReaderAt, lay layout, stable bool, pre []byte) (cur slot, ok bool, err error) {
	bp := peekPool.Get().(*[]byte)
	defer peekPool.Put(bp)
	buf := *bp
	for attempt := 0; ; attempt++ {
		var heads [2][slotHeaderSize]byte
		var got [2]slot
		var whole [2]bool
		for i := range 2 {
			var p []byte
			if i == 0 && attempt == 0 {
				p = pre
			}
			if got[i], whole[i], err = readSlot(f, lay, i, buf, p, &heads[i]); err != nil {
				return slot{}, false, err
			}
		}
		if whole[0] && len(got[0].data) > lay.max {
			whole[1] = false // slot 0 covers slot 1's place
		}
		if !stable && changed(f, lay, &heads) {
			if attempt == 9 {
				return slot{}, false, errRecordBusy
			}
			continue
		}
		switch {
		case whole[0] && whole[1]:
			if got[1].seq > got[0].seq {
				return got[1], true, nil
			}
			return got[0], true, nil
		case whole[0]:
			return got[0], true, nil
		case whole[1]:
			return got[1], true, nil
		}
		return slot{}, false, nil
	}
}

// readWhole returns the first MaxRecordSize bytes of f as its record: a
// legacy file holding a record alone, or a damaged one; an empty file is
// os.ErrNotExist.
func readWhole(f io.ReaderAt) ([]byte, error) {
	b := make([]byte, sink.MaxRecordSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n == 0 {
		return nil, os.ErrNotExist
	}
	return b[:n:n], nil
}

// changed tells whether a slot header of f is no longer what heads holds.
func changed(f io.ReaderAt, lay layout, heads *[2][slotHeaderSize]byte) bool {
	var h [slotHeaderSize]byte
	for i := range 2 {
		clear(h[:])
		if _, err := f.ReadAt(h[:], lay.base+int64(i)*lay.stride); err != nil && !errors.Is(err, io.EOF) {
			return true
		}
		if h != heads[i] {
			return true
		}
	}
	return false
}

// recordFile is what the records code needs of an open file.
type recordFile interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Fd() uintptr
}

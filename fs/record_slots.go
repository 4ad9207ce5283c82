package fs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/dlqdump/dlqdump/sink"
)

// A record file holds the record in one of two slots, so that replacing a
// record is one write into the file in place (a checkpoint per block of a
// restore: a new file and a rename per write cost ~10x more on ext4):
//
//	slot 0 at offset 0, slot 1 at offset slotStride (the file is sparse)
//	slot: "DLQR" | seq uint64 | len uint32 | crc32c uint32 | data[len]
//
// The CRC32C covers seq, len and the data. The record is the valid slot with
// the higher seq; a write goes to the other slot, so a write torn by a crash
// or a full disk leaves the previous record whole (a record may go back one
// version, which makes a restorer repeat work, never skip it). A record is
// created whole in slot 0 through a temporary file and a rename. A file not
// starting with the magic and no longer than MaxRecordSize holds the record
// itself (written by an older version).

const (
	slotMagic      = "DLQR"
	slotHeaderSize = 20
	// slotStride is where slot 1 starts: room for the largest record.
	slotStride = (slotHeaderSize + sink.MaxRecordSize + 4095) &^ 4095
	// slotPeek is what a read takes of each slot first: the whole of any
	// record of a few KiB.
	slotPeek = 8 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTornRecord means no slot of a record file holds a whole record: a write
// was torn, or the file was damaged.
var errTornRecord = errors.New("no whole record in the file")

// errRecordBusy means a record was written so often while it was read without
// the lock that no read saw both slots unchanged: read it under the lock.
var errRecordBusy = errors.New("record rewritten during every read")

// slot is one slot of a record file.
type slot struct {
	index int // 0 or 1
	seq   uint64
	data  []byte
}

// appendSlot appends the slot holding data with sequence number seq.
func appendSlot(dst []byte, seq uint64, data []byte) []byte {
	dst = append(dst, slotMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(data)))
	crc := crc32.Update(0, castagnoli, dst[len(dst)-12:])
	crc = crc32.Update(crc, castagnoli, data)
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	return append(dst, data...)
}

// readSlot reads the slot at index of f; ok is false when it holds no whole
// record.
func readSlot(f *os.File, index int, buf []byte) (s slot, ok bool, err error) {
	off := int64(index) * slotStride
	n, err := f.ReadAt(buf[:slotPeek], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return slot{}, false, err
	}
	b := buf[:n]
	if len(b) < slotHeaderSize || string(b[:4]) != slotMagic {
		return slot{}, false, nil
	}
	size := binary.LittleEndian.Uint32(b[12:])
	if size == 0 || size > sink.MaxRecordSize {
		return slot{}, false, nil
	}
	want := slotHeaderSize + int(size)
	if want > len(b) {
		full := make([]byte, want)
		if n, err = f.ReadAt(full, off); n < want {
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
	data := make([]byte, size)
	copy(data, b[slotHeaderSize:want])
	return slot{index: index, seq: binary.LittleEndian.Uint64(b[4:]), data: data}, true, nil
}

// readRecordSlots reads the record of the file at path: the newest whole
// slot, and whether the file has slots at all (false: it holds the record
// itself, written whole by an older version). A missing or empty file is
// os.ErrNotExist; a file with slots none of which is whole, errTornRecord.
func readRecordSlots(path string) (cur slot, slotted bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return slot{}, false, err
	}
	defer f.Close()
	return readSlots(f, path, false)
}

// readSlots reads the record of f, the file at path, as readRecordSlots
// does; locked tells that the caller holds the lock on the records, so that
// no write can happen while it reads.
func readSlots(f *os.File, path string, locked bool) (cur slot, slotted bool, err error) {
	buf := make([]byte, slotPeek)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return slot{}, false, err
	}
	if n == 0 {
		return slot{}, false, os.ErrNotExist
	}
	if n < len(slotMagic) || string(buf[:len(slotMagic)]) != slotMagic {
		st, err := f.Stat()
		if err != nil {
			return slot{}, false, err
		}
		if st.Size() <= sink.MaxRecordSize {
			b := make([]byte, st.Size())
			if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
				return slot{}, false, err
			}
			return slot{data: b}, false, nil
		}
		// Slot 0 torn: slot 1 may hold the record.
	}
	// Read both slots, then their headers again: a write that completed in
	// between changed a header, and the slots are read again, so that a
	// reader never returns a record older than one it could have seen
	// before (slot 0 read, then two writes, then slot 1 torn).
	for attempt := 0; ; attempt++ {
		var best slot
		found := false
		var heads [2][slotHeaderSize]byte
		for i := range 2 {
			if !locked {
				if _, err := f.ReadAt(heads[i][:], int64(i)*slotStride); err != nil && !errors.Is(err, io.EOF) {
					return slot{}, true, err
				}
			}
			s, ok, err := readSlot(f, i, buf)
			if err != nil {
				return slot{}, true, err
			}
			if ok && (!found || s.seq > best.seq) {
				best, found = s, true
			}
		}
		if !locked && changed(f, &heads) {
			if attempt == 9 {
				return slot{}, true, errRecordBusy
			}
			continue
		}
		if !found {
			return slot{}, true, fmt.Errorf("record %s: %w", path, errTornRecord)
		}
		return best, true, nil
	}
}

// changed tells whether a slot header of f is no longer what heads holds.
func changed(f *os.File, heads *[2][slotHeaderSize]byte) bool {
	var h [slotHeaderSize]byte
	for i := range 2 {
		clear(h[:])
		if _, err := f.ReadAt(h[:], int64(i)*slotStride); err != nil && !errors.Is(err, io.EOF) {
			return true
		}
		if h != heads[i] {
			return true
		}
	}
	return false
}

// writeSlot writes data into the slot of f that does not hold cur, with the
// next sequence number.
func writeSlot(f *os.File, cur slot, data []byte) error {
	b := appendSlot(make([]byte, 0, slotHeaderSize+len(data)), cur.seq+1, data)
	_, err := f.WriteAt(b, int64(1-cur.index)*slotStride)
	return err
}

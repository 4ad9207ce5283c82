package fs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"sync"

	"github.com/dlqdump/dlqdump/sink"
)

// A record file holds the record in one of two slots, so that replacing a
// record is one write into the file in place (a checkpoint per block of a
// restore: a new file and a rename per write cost ~6x more on ext4):
//
//	slot 0 at offset 0, slot 1 at offset 16 KiB (slotStride)
//	slot: "DLQR" | seq uint64 | len uint32 | crc32c uint32 | data[len]
//
// The CRC32C covers seq, len and the data. The record is the valid slot with
// the higher seq; a write goes to the other slot, so a write torn by a crash
// or a full disk leaves the previous record whole (a record may go back one
// version, which makes a restorer repeat work, never skip it). A record is
// created, and replaced when it or the one it replaces is larger than a
// slot (slotMax) or the file cannot be opened for writing, whole in slot 0
// through a temporary file and a rename; slot 1 is then not read, as slot 0
// covers it. A file with no whole slot is read under the lock as the record
// itself: written whole by an older version, or damaged (its bytes, which
// the claim protocol finds damaged and takes over, rewriting it whole).
//
// Older versions read a record file whose record fits its slots as a damaged
// record (it starts with the magic): they take its claim over after a lease
// and restore its segment from the start. Stop every restorer before going
// back to one.

const (
	slotMagic      = "DLQR"
	slotHeaderSize = 20
	// slotStride is where slot 1 starts. Part of the format: never
	// derived from a constant that may change.
	slotStride = 16 << 10
	// slotMax is the largest record written in place.
	slotMax = slotStride - slotHeaderSize
	// slotPeek is what a read takes of each slot first: the whole of a
	// record of a few KiB.
	slotPeek = 8 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// peekPool holds the buffers slots are read into (a slot's record is copied
// out): a checkpoint per block of a restore would otherwise allocate one,
// whose first touch costs page faults when the heap is growing.
var peekPool = sync.Pool{New: func() any { b := make([]byte, slotPeek); return &b }}

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

// readSlot reads the slot at index of f into buf, and its header bytes (as
// read, whole or not) into head; ok is false when it holds no whole record.
func readSlot(f io.ReaderAt, index int, buf []byte, head *[slotHeaderSize]byte) (s slot, ok bool, err error) {
	off := int64(index) * slotStride
	n, err := f.ReadAt(buf[:slotPeek], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return slot{}, false, err
	}
	b := buf[:n]
	copy(head[:], b) // zeros past the end of the file, as changed reads them
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

// readRecordSlots reads the record of the file at path without the lock:
// the newest whole slot, and whether the file has slots. A missing or empty
// file is os.ErrNotExist; a file with no whole slot, errTornRecord (read it
// under the lock).
func readRecordSlots(path string) (cur slot, slotted bool, err error) {
	f, err := openRecordFile(path, false)
	if err != nil {
		return slot{}, false, err
	}
	defer f.Close()
	return readSlots(f, path, false)
}

// readSlots reads the record of f, the file at path, as readRecordSlots
// does; locked tells that the caller holds the lock on the records, so that
// no write happens while it reads: a file with no whole slot is then the
// record itself (slotted false), its first MaxRecordSize bytes.
func readSlots(f io.ReaderAt, path string, locked bool) (cur slot, slotted bool, err error) {
	bp := peekPool.Get().(*[]byte)
	defer peekPool.Put(bp)
	buf := *bp
	// Read both slots, then (without the lock) their headers again: a
	// write that completed in between changed a header, and the slots are
	// read again, so that a reader never returns a record older than one
	// it could have seen before (slot 0 read, then two writes, then slot 1
	// torn).
	for attempt := 0; ; attempt++ {
		var heads [2][slotHeaderSize]byte
		var got [2]slot
		var ok [2]bool
		for i := range 2 {
			if got[i], ok[i], err = readSlot(f, i, buf, &heads[i]); err != nil {
				return slot{}, false, err
			}
		}
		if ok[0] && len(got[0].data) > slotMax {
			ok[1] = false // slot 0 covers slot 1's place
		}
		if !locked && changed(f, &heads) {
			if attempt == 9 {
				return slot{}, false, errRecordBusy
			}
			continue
		}
		switch {
		case ok[0] && ok[1]:
			if got[1].seq > got[0].seq {
				return got[1], true, nil
			}
			return got[0], true, nil
		case ok[0]:
			return got[0], true, nil
		case ok[1]:
			return got[1], true, nil
		case !locked:
			return slot{}, false, fmt.Errorf("record %s: %w", path, errTornRecord)
		}
		return readWhole(f)
	}
}

// readWhole returns the first MaxRecordSize bytes of f as its record; an
// empty file is os.ErrNotExist.
func readWhole(f io.ReaderAt) (slot, bool, error) {
	b := make([]byte, sink.MaxRecordSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return slot{}, false, err
	}
	if n == 0 {
		return slot{}, false, os.ErrNotExist
	}
	return slot{data: b[:n:n]}, false, nil
}

// changed tells whether a slot header of f is no longer what heads holds.
func changed(f io.ReaderAt, heads *[2][slotHeaderSize]byte) bool {
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

// inPlace tells whether data can replace cur by a write into the other
// slot: both fit a slot, and the sequence number has not reached its end.
func inPlace(cur slot, data []byte) bool {
	return len(data) <= slotMax && len(cur.data) <= slotMax && cur.seq < math.MaxUint64
}

// writeSlot writes data into the slot of f that does not hold cur, with the
// next sequence number.
func writeSlot(f io.WriterAt, cur slot, data []byte) error {
	b := appendSlot(make([]byte, 0, slotHeaderSize+len(data)), cur.seq+1, data)
	_, err := f.WriteAt(b, int64(1-cur.index)*slotStride)
	return err
}

// recordFile is what the records code needs of an open file.
type recordFile interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Fd() uintptr
}

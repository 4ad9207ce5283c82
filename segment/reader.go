package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// ReaderOptions tune a Reader.
type ReaderOptions struct {
	// Name is the segment's name, used in errors.
	Name string
	// MaxBlockSize caps the raw size of a block the reader accepts, and so
	// the memory it allocates. Default MaxBlockSize.
	MaxBlockSize int
}

// Position is a place in a segment to resume reading from: the record with
// sequence number Seq, in the block that starts at Offset. The zero Position
// is the start of the segment.
type Position struct {
	Offset int64
	Seq    uint64
}

// Reader reads records from a segment through an io.ReaderAt, one block at a
// time: its memory is bounded by a block, never the whole segment. Every
// checksum is verified. Damage is reported as a *CorruptError naming the
// segment and the offset; reading then goes on with the next intact block, so
// every intact block's records are still returned. It is not safe for
// concurrent use.
type Reader struct {
	src      io.ReaderAt
	size     int64
	name     string
	maxBlock int

	hdr       Header
	footer    *Footer
	footerErr error
	end       int64 // where blocks end: the footer's offset, or size

	// iteration
	next    int64  // offset of the next block to load
	seq     uint64 // lowest sequence number the next block may start at
	skipSeq uint64 // records below this sequence number are not returned
	nblock  int    // index of the next block
	done    bool

	cur     BlockInfo
	raw     []byte   // storage for the raw bytes of blocks
	blk     []byte   // the current block's records, all checked by parseBlock
	pay     []uint32 // where each record's payload starts in blk
	nrec    int      // number of records in blk
	ri      int      // index of the next record in blk
	rpos    int      // offset of the next record in blk
	recBase int64

	// read-ahead window over src
	win    []byte
	winOff int64
}

// NewReader opens the segment in src, of the given size, and verifies its
// header. A segment without a valid footer (unsealed) is still read block by
// block; Sealed and FooterError tell which case it is.
func NewReader(src io.ReaderAt, size int64, opts *ReaderOptions) (*Reader, error) {
	r := &Reader{src: src, size: size, maxBlock: MaxBlockSize}
	if opts != nil {
		r.name = opts.Name
		if opts.MaxBlockSize > 0 {
			r.maxBlock = opts.MaxBlockSize
		}
	}
	if size < HeaderSize {
		return nil, r.corrupt(0, -1, fmt.Errorf("%w: %d bytes, shorter than a segment header", ErrCorrupt, size))
	}
	hb, err := r.read(0, HeaderSize)
	if err != nil {
		return nil, err
	}
	if r.hdr, err = unmarshalHeader(hb); err != nil {
		return nil, r.corrupt(0, -1, err)
	}
	r.end = size
	if err := r.readFooter(); err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return nil, err // I/O error
		}
		r.footerErr = err
	}
	r.next, r.seq = HeaderSize, 0
	return r, nil
}

// Header returns the segment's header.
func (r *Reader) Header() Header { return r.hdr }

// Size returns the segment's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// Sealed reports whether the segment has a valid footer.
func (r *Reader) Sealed() bool { return r.footer != nil }

// Footer returns the segment's footer, nil when it is unsealed.
func (r *Reader) Footer() *Footer { return r.footer }

// FooterError says why the segment counts as unsealed (a *CorruptError
// wrapping ErrUnsealed or ErrCorrupt); nil when it is sealed.
func (r *Reader) FooterError() error { return r.footerErr }

// Block returns the block the last record returned by Next came from.
func (r *Reader) Block() BlockInfo { return r.cur }

// Pos returns the position of the next record Next would return.
func (r *Reader) Pos() Position {
	if r.ri < r.nrec {
		return Position{Offset: r.cur.Offset, Seq: r.cur.FirstSeq + uint64(r.ri)}
	}
	return Position{Offset: r.next, Seq: max(r.seq, r.skipSeq)}
}

// Seek makes Next continue from pos, as returned by Pos (possibly by another
// Reader of the same segment).
func (r *Reader) Seek(pos Position) error {
	if pos.Offset == 0 && pos.Seq == 0 {
		pos.Offset = HeaderSize
	}
	if pos.Offset < HeaderSize || pos.Offset > r.end {
		return fmt.Errorf("dlqdump: segment %s: seek to offset %d outside the blocks [%d, %d]", r.name, pos.Offset, HeaderSize, r.end)
	}
	r.next, r.seq, r.skipSeq = pos.Offset, 0, pos.Seq
	r.dropBlock()
	r.done = false
	r.nblock = 0
	if r.footer != nil {
		// Keep block indexes exact for errors.
		for i, b := range r.footer.Blocks {
			if b.Offset >= pos.Offset {
				r.nblock = i
				break
			}
		}
	}
	return nil
}

// Next returns the next record. It returns io.EOF after the last one. On
// damage it returns a *CorruptError once; the following call goes on with the
// next intact block. The record's Headers and Payload stay valid until Next
// moves to another block.
func (r *Reader) Next() (Record, error) {
	for r.ri >= r.nrec {
		if err := r.loadBlock(); err != nil {
			return Record{}, err
		}
	}
	p := r.nextRecord()
	return Record{
		Seq:     r.cur.FirstSeq + uint64(r.ri-1),
		Time:    r.recBase + p.delta,
		Headers: Headers{n: p.nh, b: p.hdr},
		Payload: p.payload,
	}, nil
}

// nextRecord decodes the next record of the current block.
func (r *Reader) nextRecord() parsedRecord {
	p, end := recordAt(r.blk, r.rpos, r.pay[r.ri])
	r.rpos = end
	r.ri++
	return p
}

// recordAt decodes the record that starts at offset start of a block's
// records and whose payload starts at pay, as found by parseBlock, which
// checked them all. It returns the offset where the record ends.
func recordAt(b []byte, start int, pay uint32) (parsedRecord, int) {
	bodyLen, i := uvarintAt(b, start)
	end := i + int(bodyLen)
	ux, i := uvarintAt(b, i)
	d := int64(ux >> 1)
	if ux&1 != 0 {
		d = ^d
	}
	nh, i := uvarintAt(b, i)
	return parsedRecord{delta: d, nh: int(nh), hdr: b[i:pay], payload: b[pay:end]}, end
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

// dropBlock forgets the current block's records.
func (r *Reader) dropBlock() {
	r.blk, r.nrec, r.ri, r.rpos = nil, 0, 0, 0
}

// NextBlock skips the rest of the current block and loads the next one,
// returning its description. Its records are then returned by Next.
func (r *Reader) NextBlock() (BlockInfo, error) {
	r.ri = r.nrec
	if err := r.loadBlock(); err != nil {
		return BlockInfo{}, err
	}
	return r.cur, nil
}

// loadBlock loads the next intact block. It returns io.EOF at the
// end, or a *CorruptError for a damaged block after which it has already moved
// past the damage.
func (r *Reader) loadBlock() error {
	r.dropBlock()
	if r.done {
		return io.EOF
	}
	if r.next >= r.end {
		r.done = true
		return io.EOF
	}
	off, idx := r.next, r.nblock
	info, err := r.parseBlock(off)
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return err // I/O error: retrying may help, position unchanged
		}
		r.skipDamage(off)
		return err
	}
	r.next = info.End()
	r.nblock = idx + 1
	r.seq = info.FirstSeq + uint64(info.Count)
	r.cur = info
	// Drop records before the resume point.
	if r.skipSeq > info.FirstSeq {
		skip := int(min(uint64(r.nrec), r.skipSeq-info.FirstSeq))
		for r.ri < skip {
			r.nextRecord()
		}
	}
	return nil
}

// skipDamage moves past a damaged block that starts at off: to the next block
// of the footer's index when sealed, else to the next place a block header
// with a valid checksum starts.
func (r *Reader) skipDamage(off int64) {
	r.nblock++
	if r.footer != nil {
		for i, b := range r.footer.Blocks {
			if b.Offset > off {
				r.next, r.nblock = b.Offset, i
				r.seq = b.FirstSeq
				return
			}
		}
		r.next = r.end
		return
	}
	r.next = r.resync(off + 1)
}

// resync returns the offset of the first intact block at or after from, or
// end when there is none.
func (r *Reader) resync(from int64) int64 {
	const chunk = 64 << 10
	var mb [4]byte
	binary.LittleEndian.PutUint32(mb[:], blockMagic)
	for off := from; off+BlockHeaderSize <= r.end; {
		n := min(int64(chunk), r.end-off)
		buf, err := r.read(off, int(n))
		if err != nil {
			return r.end
		}
		i := bytes.Index(buf, mb[:])
		if i < 0 {
			off += max(n-3, 1)
			continue
		}
		cand := off + int64(i)
		if _, _, err := r.checkBlock(cand); err == nil {
			return cand
		}
		off = cand + 1
	}
	return r.end
}

// checkBlock reads and verifies the block header and checksum at off,
// returning the block's description and its records' base time.
func (r *Reader) checkBlock(off int64) (BlockInfo, int64, error) {
	idx := r.nblock
	if r.end-off < BlockHeaderSize {
		return BlockInfo{}, 0, r.corrupt(off, idx, fmt.Errorf("%w: %d bytes left, a block header needs %d (truncated)", ErrCorrupt, r.end-off, BlockHeaderSize))
	}
	hb, err := r.read(off, BlockHeaderSize)
	if err != nil {
		return BlockInfo{}, 0, err
	}
	h := [BlockHeaderSize]byte(hb) // the window may move when the stored bytes are read
	le := binary.LittleEndian
	if le.Uint32(h[:]) != blockMagic {
		return BlockInfo{}, 0, r.corrupt(off, idx, fmt.Errorf("%w: no block magic", ErrCorrupt))
	}
	switch h[4] {
	case blockTypeData:
	case blockTypeFooter:
		return BlockInfo{}, 0, r.corrupt(off, idx, fmt.Errorf("%w: damaged footer", ErrCorrupt))
	default:
		return BlockInfo{}, 0, r.corrupt(off, idx, fmt.Errorf("%w: unknown block type %#x", ErrCorrupt, h[4]))
	}
	info := BlockInfo{
		Offset:    off,
		Codec:     Codec(h[5]),
		Count:     le.Uint32(h[8:]),
		RawLen:    le.Uint32(h[12:]),
		StoredLen: le.Uint32(h[16:]),
		FirstSeq:  le.Uint64(h[20:]),
		MinTime:   int64(le.Uint64(h[36:])),
		MaxTime:   int64(le.Uint64(h[44:])),
	}
	base := int64(le.Uint64(h[28:]))
	// Bound what is read before trusting the header.
	switch {
	case int64(info.StoredLen) > r.end-off-BlockHeaderSize:
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: stored length %d exceeds the %d bytes left (truncated)", ErrCorrupt, info.StoredLen, r.end-off-BlockHeaderSize))
	case int64(info.RawLen) > int64(r.maxBlock):
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: raw length %d exceeds the cap %d", ErrTooLarge, info.RawLen, r.maxBlock))
	case info.StoredLen > info.RawLen:
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: stored length %d exceeds raw length %d", ErrCorrupt, info.StoredLen, info.RawLen))
	}
	stored, err := r.read(off+BlockHeaderSize, int(info.StoredLen))
	if err != nil {
		return info, 0, err
	}
	crc := crc32.Update(crc32.Checksum(stored, castag), castag, h[:56])
	if got := le.Uint32(h[56:]); got != crc {
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: block checksum %08x, want %08x", ErrCorrupt, got, crc))
	}
	switch {
	case !info.Codec.valid():
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: unknown codec %d", ErrFormat, info.Codec))
	case info.RawLen == 0 || info.Count == 0:
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: empty block", ErrCorrupt))
	case uint64(info.Count) > uint64(info.RawLen)/3:
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, info.Count, info.RawLen))
	case info.MinTime > info.MaxTime:
		return info, 0, r.corrupt(off, idx, fmt.Errorf("%w: min time after max time", ErrCorrupt))
	}
	return info, base, nil
}

// parseBlock loads the block at off: verifies it, decompresses it and checks
// every record in it, so a block yields all its records or none.
func (r *Reader) parseBlock(off int64) (BlockInfo, error) {
	info, base, err := r.checkBlock(off)
	if err != nil {
		return info, err
	}
	idx := r.nblock
	if info.FirstSeq < r.seq {
		return info, r.corrupt(off, idx, fmt.Errorf("%w: first sequence number %d, expected at least %d", ErrCorrupt, info.FirstSeq, r.seq))
	}
	if r.footer != nil && idx < len(r.footer.Blocks) {
		if want := r.footer.Blocks[idx]; want.Offset != off || want.FirstSeq != info.FirstSeq || want.Count != info.Count ||
			want.RawLen != info.RawLen || want.StoredLen != info.StoredLen {
			return info, r.corrupt(off, idx, fmt.Errorf("%w: block does not match the footer's index", ErrCorrupt))
		}
	}
	stored, err := r.read(off+BlockHeaderSize, int(info.StoredLen)) // in the window
	if err != nil {
		return info, err
	}
	// Check the raw length against what the stored bytes say before
	// allocating for it.
	if err := checkRawLen(info.Codec, stored, int(info.RawLen)); err != nil {
		return info, r.corrupt(off, idx, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	// The slack lets zstd use its fast copies, which may write up to 16
	// bytes past a block; the output is still checked to be RawLen long.
	need := int(info.RawLen) + decodeSlack
	if cap(r.raw) < need {
		// Headroom: blocks of one segment differ by a record or so.
		r.raw = make([]byte, 0, need+min(need/8, r.maxBlock-need+decodeSlack))
	}
	raw, err := decodeBlock(info.Codec, stored, r.raw[:0:need], int(info.RawLen))
	if err != nil {
		return info, r.corrupt(off, idx, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	// Check every record, keeping only where its payload starts: 4 bytes
	// a record, where decoded records would take 64, so a block of tiny
	// records cannot make the reader's memory many times the block's size.
	// The count was checked against the raw length, which the records are.
	if cap(r.pay) < int(info.Count) {
		r.pay = make([]uint32, 0, info.Count)
	}
	r.pay = r.pay[:0]
	b := raw
	for i := range int(info.Count) {
		p, rest, err := parseRecord(b)
		if err != nil {
			return info, r.corrupt(off, idx, fmt.Errorf("%w: record %d: %v", ErrCorrupt, info.FirstSeq+uint64(i), err))
		}
		if t := base + p.delta; t < info.MinTime || t > info.MaxTime {
			return info, r.corrupt(off, idx, fmt.Errorf("%w: record %d: time outside the block's range", ErrCorrupt, info.FirstSeq+uint64(i)))
		}
		r.pay = append(r.pay, uint32(len(raw)-len(rest)-len(p.payload)))
		b = rest
	}
	if len(b) != 0 {
		return info, r.corrupt(off, idx, fmt.Errorf("%w: %d bytes after the last record", ErrCorrupt, len(b)))
	}
	r.recBase = base
	r.blk, r.nrec, r.ri, r.rpos = raw, int(info.Count), 0, 0
	return info, nil
}

// readFooter finds and verifies the footer through the trailer.
func (r *Reader) readFooter() error {
	unsealed := func(format string, args ...any) error {
		return r.corrupt(r.size, -1, fmt.Errorf("%w: "+format, append([]any{ErrUnsealed}, args...)...))
	}
	if r.size < HeaderSize+footerSize(0) {
		return unsealed("no room for a footer")
	}
	t, err := r.read(r.size-TrailerSize, TrailerSize)
	if err != nil {
		return err
	}
	if [8]byte(t[4:12]) != endMagic {
		return unsealed("no end magic")
	}
	le := binary.LittleEndian
	flen := int64(le.Uint32(t))
	foff := r.size - TrailerSize - flen
	if flen < FooterFixedSize+4 || foff < HeaderSize || (flen-FooterFixedSize-4)%IndexEntrySize != 0 {
		return r.corrupt(r.size-TrailerSize, -1, fmt.Errorf("%w: footer length %d is impossible", ErrCorrupt, flen))
	}
	n := int((flen - FooterFixedSize - 4) / IndexEntrySize)
	// Every block takes at least a header and one stored byte.
	if int64(n) > (foff-HeaderSize)/(BlockHeaderSize+1) {
		return r.corrupt(foff, -1, fmt.Errorf("%w: footer lists %d blocks, more than fit", ErrCorrupt, n))
	}
	fb, err := r.read(foff, int(flen))
	if err != nil {
		return err
	}
	if got, want := le.Uint32(fb[flen-4:]), crc32.Checksum(fb[:flen-4], castag); got != want {
		return r.corrupt(foff, -1, fmt.Errorf("%w: footer checksum %08x, want %08x", ErrCorrupt, got, want))
	}
	if le.Uint32(fb) != blockMagic || fb[4] != blockTypeFooter || int(le.Uint32(fb[8:])) != n {
		return r.corrupt(foff, -1, fmt.Errorf("%w: bad footer header", ErrCorrupt))
	}
	f := &Footer{
		Records:     le.Uint64(fb[12:]),
		RawBytes:    le.Uint64(fb[20:]),
		StoredBytes: le.Uint64(fb[28:]),
		Sealed:      time.Unix(0, int64(le.Uint64(fb[52:]))).UTC(),
		Blocks:      make([]BlockInfo, n),
	}
	minT, maxT := int64(le.Uint64(fb[36:])), int64(le.Uint64(fb[44:]))
	if f.Records > 0 {
		f.MinTime, f.MaxTime = time.Unix(0, minT).UTC(), time.Unix(0, maxT).UTC()
	}
	var seq uint64
	prev := int64(HeaderSize) - 1
	for i := range f.Blocks {
		e := fb[FooterFixedSize+i*IndexEntrySize:]
		b := BlockInfo{
			Offset:   int64(le.Uint64(e)),
			FirstSeq: le.Uint64(e[8:]),
			Count:    le.Uint32(e[16:]),
			RawLen:   le.Uint32(e[20:]),
			MinTime:  int64(le.Uint64(e[24:])),
			MaxTime:  int64(le.Uint64(e[32:])),
		}
		if b.Offset <= prev || b.Offset >= foff || (i == 0 && b.Offset != HeaderSize) || b.FirstSeq != seq {
			return r.corrupt(foff, -1, fmt.Errorf("%w: footer index entry %d is inconsistent", ErrCorrupt, i))
		}
		prev, seq = b.Offset, seq+uint64(b.Count)
		f.Blocks[i] = b
	}
	// Blocks follow each other up to the footer: their stored lengths are
	// what lies between their headers.
	for i := range f.Blocks {
		b := &f.Blocks[i]
		end := foff
		if i+1 < len(f.Blocks) {
			end = f.Blocks[i+1].Offset
		}
		stored := end - b.Offset - BlockHeaderSize
		if stored < 1 || stored > int64(b.RawLen) {
			return r.corrupt(foff, -1, fmt.Errorf("%w: footer index entry %d leaves %d bytes for a block of %d", ErrCorrupt, i, stored, b.RawLen))
		}
		b.StoredLen = uint32(stored)
	}
	if seq != f.Records {
		return r.corrupt(foff, -1, fmt.Errorf("%w: footer counts %d records, its index %d", ErrCorrupt, f.Records, seq))
	}
	r.footer, r.end = f, foff
	return nil
}

// read returns n bytes at off, through the read-ahead window. The slice is
// valid until the next read.
func (r *Reader) read(off int64, n int) ([]byte, error) {
	if off >= r.winOff && off+int64(n) <= r.winOff+int64(len(r.win)) {
		i := off - r.winOff
		return r.win[i : i+int64(n)], nil
	}
	const readAhead = 256 << 10
	want := int64(max(n, readAhead))
	want = max(min(want, r.size-off), int64(n))
	if cap(r.win) < int(want) {
		r.win = make([]byte, want)
	}
	r.win = r.win[:want]
	got, err := r.src.ReadAt(r.win, off)
	if got < n {
		r.win, r.winOff = r.win[:0], 0
		return nil, r.ioError(off, n, err)
	}
	r.win, r.winOff = r.win[:got], off
	return r.win[:n], nil
}

// ioError reports a failed read of the source. Whatever it wraps, it never
// matches io.EOF: a network client may report a dropped connection as an
// error wrapping io.EOF, and a caller must not take that for the end of the
// segment, which this package reports only as the bare io.EOF.
func (r *Reader) ioError(off int64, n int, err error) error {
	switch {
	case err == nil || err == io.EOF:
		err = io.ErrUnexpectedEOF
	case errors.Is(err, io.EOF):
		err = fmt.Errorf("%w (%v)", io.ErrUnexpectedEOF, err)
	}
	return fmt.Errorf("dlqdump: segment %s: read %d bytes at offset %d: %w", r.name, n, off, err)
}

// AtEnd reports whether reading reached the end of the segment's blocks:
// Next or ReadBlock returned io.EOF there, not earlier.
func (r *Reader) AtEnd() bool { return r.done && r.next >= r.end }

func (r *Reader) corrupt(off int64, block int, err error) error {
	return &CorruptError{Segment: r.name, Offset: off, Block: block, Err: err}
}

package segment

import (
	"github.com/dlqdump/dlqdump/internal/errs"

	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// errFooterLies marks the damage reported when an encrypted segment's
// footer does not match an authenticated block.
var errFooterLies = errors.New("the footer is not authenticated")

// blockJob is a block whose header, checksum and place in the segment were
// verified: what is left is to decompress it and check its records, which
// decodeJob does on any goroutine.
type blockJob struct {
	info   BlockInfo
	base   int64  // the records' base time
	idx    int    // the block's index, for errors
	skip   int    // records before the resume point of a Seek
	stored []byte // the stored bytes; valid until the reader reads again
	fcs    bool   // the stored bytes say how long they decode to

	// A sealed block's: the sealer (nil when the block is not sealed),
	// its header as authenticated and its nonce counter. openJob opens it.
	seal    *sealer
	aad     [56]byte
	counter uint32
}

// nextJob finds the next block and verifies all of it that can be verified
// before decompressing it, and moves the reader past it. It returns io.EOF
// at the end; a *CorruptError for damage, already moved past; any other
// error is an I/O error, after which the position is unchanged.
func (r *Reader) nextJob() (blockJob, error) {
	if err := r.pending; err != nil {
		r.pending = nil
		return blockJob{}, err
	}
	if r.done || r.next >= r.end {
		r.done = true
		return blockJob{}, io.EOF
	}
	if r.keyErr != nil && !r.verifying {
		// Encrypted and no key: never return the sealed bytes as data.
		return blockJob{}, r.keyErr
	}
	off, idx := r.next, r.nblock
	j, verified, err := r.checkJob(off)
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return blockJob{}, err // I/O error: retrying may help, position unchanged
		}
		if errors.Is(err, errFooterLies) {
			return blockJob{}, err // the next call reads the block
		}
		if verified && r.footer == nil {
			// The checksum vouches for the block's extent: go on after
			// it rather than look for blocks inside it.
			r.pass(&j.info, idx)
		} else {
			r.skipDamage(off)
		}
		return blockJob{}, err
	}
	if r.seqSure && j.info.FirstSeq > r.seq {
		// An intact block, after records that are not there: blocks
		// removed (by someone who can write to the store, or lost).
		// Reported once, as damage; the next call returns the block.
		gap := r.corrupt(off, idx, fmt.Errorf("%w: records %d to %d are missing before this block (a block starting at record %d was expected)",
			ErrCorrupt, r.seq, j.info.FirstSeq-1, r.seq))
		r.seq = j.info.FirstSeq
		return blockJob{}, gap
	}
	r.pass(&j.info, idx)
	if r.skipSeq > j.info.FirstSeq {
		j.skip = int(min(uint64(j.info.Count), r.skipSeq-j.info.FirstSeq))
	}
	return j, nil
}

// pass moves the reader past the verified block b, the idx-th.
func (r *Reader) pass(b *BlockInfo, idx int) {
	r.next = b.End()
	r.nblock = idx + 1
	r.seq = max(r.seq, b.FirstSeq+uint64(b.Count))
	r.seqSure = true
}

// checkJob verifies the block at off short of decompressing it. verified
// reports that its header and checksum are intact, whatever else is wrong.
func (r *Reader) checkJob(off int64) (j blockJob, verified bool, err error) {
	info, base, stored, err := r.checkBlock(off)
	if err != nil {
		return j, false, err
	}
	idx := r.nblock
	j = blockJob{info: info, base: base, idx: idx, stored: stored}
	if r.hdr.Encrypted {
		j.seal, j.aad = r.seal, r.aad
		j.counter = binary.LittleEndian.Uint32(r.aad[52:])
	}
	switch {
	case int64(info.RawLen) > int64(r.maxBlock):
		return j, true, r.corrupt(off, idx, fmt.Errorf("%w: raw length %d exceeds the cap %d", ErrTooLarge, info.RawLen, r.maxBlock))
	case r.expansion > 0 && int64(info.RawLen) > r.expansion*(BlockHeaderSize+int64(info.StoredLen)):
		return j, true, r.corrupt(off, idx, fmt.Errorf("%w: raw length %d is more than %d times the %d bytes the block takes",
			ErrTooLarge, info.RawLen, r.expansion, BlockHeaderSize+int64(info.StoredLen)))
	}
	if info.FirstSeq < r.seq {
		return j, true, r.corrupt(off, idx, fmt.Errorf("%w: first sequence number %d, expected at least %d", ErrCorrupt, info.FirstSeq, r.seq))
	}
	if r.footer != nil && idx < len(r.footer.Blocks) && !r.footerLies {
		if want := r.footer.Blocks[idx]; want.Offset != off || want.FirstSeq != info.FirstSeq || want.Count != info.Count ||
			want.RawLen != info.RawLen || want.StoredLen != info.StoredLen {
			if r.seal != nil {
				// Encrypted and read with the key: the block's header
				// is authenticated with it, the footer is not. The
				// footer is reported, once, and no longer trusted;
				// the block is read as it is.
				r.footerLies = true
				return j, true, r.corrupt(off, idx, errs.Chain(ErrCorrupt, errFooterLies, errors.New("block does not match the footer's index; the block, authenticated, is read, the footer no longer used")))
			}
			return j, true, r.corrupt(off, idx, fmt.Errorf("%w: block does not match the footer's index", ErrCorrupt))
		}
	}
	// Check the raw length against what the stored bytes say before
	// anything is allocated for it (for a sealed block, once opened).
	if r.hdr.Encrypted {
		return j, true, nil
	}
	if j.fcs, err = checkRawLen(info.Codec, stored, int(info.RawLen)); err != nil {
		return j, true, r.corrupt(off, idx, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	return j, true, nil
}

// skipDamage moves past a damaged block that starts at off: to the next block
// of the footer's index when sealed, else to the next place a block header
// with a valid checksum starts.
func (r *Reader) skipDamage(off int64) {
	r.nblock++
	if r.footer != nil && !r.footerLies {
		if i := r.footer.blockAfter(off); i < len(r.footer.Blocks) {
			b := r.footer.Blocks[i]
			r.next, r.nblock, r.seq, r.seqSure = b.Offset, i, b.FirstSeq, true
			return
		}
		r.next = r.end
		return
	}
	r.seqSure = false // the damage held records of its own
	r.next = r.resync(off + 1)
}

// resyncBudget returns how many stored bytes resynchronising may checksum
// between two Seeks: twice the segment plus two blocks. Damage found by
// chance in a real segment costs a scan to the next block and one block's
// checksum; a hostile segment whose every byte starts a plausible block
// header claiming the rest of the file would otherwise cost time quadratic
// in its size.
func (r *Reader) resyncBudget() int64 { return 2*r.size + 2*int64(r.maxBlock) }

// resync returns the offset of the first intact block at or after from, or
// end when there is none. When it has checksummed its budget, it gives up:
// the rest of the segment is reported as damaged by the next call.
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
		if r.resyncs > r.resyncBudget() {
			r.pending = r.corrupt(cand, -1, fmt.Errorf("%w: gave up looking for intact blocks after checking %d bytes; the rest of the segment, from offset %d, is not read",
				ErrCorrupt, r.resyncs, cand))
			return r.end
		}
		if _, _, _, err := r.checkBlock(cand); err == nil {
			return cand
		}
		off = cand + 1
	}
	return r.end
}

// checkBlock reads and verifies the block header and checksum at off,
// returning the block's description, its records' base time and its stored
// bytes (valid until the next read). The fields are checked for consistency
// before the stored bytes are read, which are at most the bytes left in the
// segment; the caps (checkLimits) are checked after, so that an intact block
// over them is found, reported and passed like any other.
func (r *Reader) checkBlock(off int64) (BlockInfo, int64, []byte, error) {
	idx := r.nblock
	fail := func(info BlockInfo, err error) (BlockInfo, int64, []byte, error) {
		return info, 0, nil, r.corrupt(off, idx, err)
	}
	if r.end-off < BlockHeaderSize {
		return fail(BlockInfo{}, fmt.Errorf("%w: %d bytes left, a block header needs %d (truncated)", ErrCorrupt, r.end-off, BlockHeaderSize))
	}
	hb, err := r.read(off, BlockHeaderSize)
	if err != nil {
		return BlockInfo{}, 0, nil, err
	}
	h := [BlockHeaderSize]byte(hb) // the window may move when the stored bytes are read
	le := binary.LittleEndian
	if le.Uint32(h[:]) != blockMagic {
		return fail(BlockInfo{}, fmt.Errorf("%w: no block magic", ErrCorrupt))
	}
	// Sealed blocks, and only they, in an encrypted segment: a block
	// cannot be made to pass for plain data (or the reverse) without
	// the checksum failing.
	overhead := uint32(0)
	switch flags := le.Uint16(h[6:]); {
	case flags&^blockSealed != 0:
		return fail(BlockInfo{}, fmt.Errorf("%w: unknown block flags %#x", ErrCorrupt, flags))
	case flags&blockSealed != 0 && !r.hdr.Encrypted:
		return fail(BlockInfo{}, fmt.Errorf("%w: sealed block in a segment that is not encrypted", ErrCorrupt))
	case flags&blockSealed == 0 && r.hdr.Encrypted:
		return fail(BlockInfo{}, fmt.Errorf("%w: block not sealed in an encrypted segment", ErrCorrupt))
	case r.hdr.Encrypted:
		overhead = TagSize
	}
	switch h[4] {
	case blockTypeData:
	case blockTypeFooter:
		return fail(BlockInfo{}, fmt.Errorf("%w: damaged footer", ErrCorrupt))
	default:
		return fail(BlockInfo{}, fmt.Errorf("%w: unknown block type %#x", ErrCorrupt, h[4]))
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
		return fail(info, fmt.Errorf("%w: stored length %d exceeds the %d bytes left (truncated)", ErrCorrupt, info.StoredLen, r.end-off-BlockHeaderSize))
	case info.StoredLen <= overhead && overhead > 0:
		return fail(info, fmt.Errorf("%w: sealed block of %d bytes, shorter than its tag", ErrCorrupt, info.StoredLen))
	case uint64(info.StoredLen) > uint64(info.RawLen)+uint64(overhead):
		return fail(info, fmt.Errorf("%w: stored length %d exceeds raw length %d", ErrCorrupt, info.StoredLen, info.RawLen))
	case !info.Codec.valid():
		return fail(info, fmt.Errorf("%w: unknown codec %d", ErrFormat, info.Codec))
	case info.RawLen == 0 || info.Count == 0:
		return fail(info, fmt.Errorf("%w: empty block", ErrCorrupt))
	case uint64(info.Count) > uint64(info.RawLen)/3:
		return fail(info, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, info.Count, info.RawLen))
	case info.MinTime > info.MaxTime:
		return fail(info, fmt.Errorf("%w: min time after max time", ErrCorrupt))
	}
	r.resyncs += int64(info.StoredLen)
	stored, err := r.readStored(off+BlockHeaderSize, int(info.StoredLen))
	if err != nil {
		return info, 0, nil, err
	}
	crc := crc32.Update(crc32.Checksum(stored, castag), castag, h[:56])
	if got := le.Uint32(h[56:]); got != crc {
		return fail(info, fmt.Errorf("%w: block checksum %08x, want %08x", ErrCorrupt, got, crc))
	}
	r.aad = [56]byte(h[:56])
	return info, base, stored, nil
}

package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"time"
)

// readFooter finds and verifies the footer through the trailer.
func (r *Reader) readFooter() error {
	unsealed := func(format string, args ...any) error {
		return r.corrupt(r.size, -1, fmt.Errorf("%w: "+format, append([]any{ErrUnsealed}, args...)...))
	}
	if r.size < r.start+footerSize(0) {
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
	overhead := int64(0)
	if r.hdr.Encrypted {
		overhead = TagSize
	}
	flen := int64(le.Uint32(t))
	foff := r.size - TrailerSize - flen
	if flen < FooterFixedSize+4 || foff < r.start || (flen-FooterFixedSize-4)%IndexEntrySize != 0 {
		return r.corrupt(r.size-TrailerSize, -1, fmt.Errorf("%w: footer length %d is impossible", ErrCorrupt, flen))
	}
	n := int((flen - FooterFixedSize - 4) / IndexEntrySize)
	// Every block takes at least a header and one stored byte.
	if int64(n) > (foff-r.start)/(BlockHeaderSize+1) {
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
	// A summary lies between the blocks and the footer.
	slen := int64(fb[5]) | int64(fb[6])<<8 | int64(fb[7])<<16
	if slen > 0 && !r.hdr.Summarized {
		return r.corrupt(foff, -1, fmt.Errorf("%w: the footer counts a summary of %d bytes, the header says none", ErrCorrupt, slen))
	}
	if slen > 0 && (slen < sumFixed+4 || foff-slen < r.start+int64(n)*(BlockHeaderSize+1)) {
		return r.corrupt(foff, -1, fmt.Errorf("%w: a summary of %d bytes is impossible", ErrCorrupt, slen))
	}
	bend := foff - slen // where the blocks end
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
	prev := r.start - 1
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
		if b.Offset <= prev || b.Offset >= bend || (i == 0 && b.Offset != r.start) || b.FirstSeq != seq {
			return r.corrupt(foff, -1, fmt.Errorf("%w: footer index entry %d is inconsistent", ErrCorrupt, i))
		}
		prev, seq = b.Offset, seq+uint64(b.Count)
		f.Blocks[i] = b
	}
	// Blocks follow each other up to the summary or the footer: their
	// stored lengths are what lies between their headers.
	for i := range f.Blocks {
		b := &f.Blocks[i]
		end := bend
		if i+1 < len(f.Blocks) {
			end = f.Blocks[i+1].Offset
		}
		stored := end - b.Offset - BlockHeaderSize
		if stored < 1 || stored > int64(b.RawLen)+overhead {
			return r.corrupt(foff, -1, fmt.Errorf("%w: footer index entry %d leaves %d bytes for a block of %d", ErrCorrupt, i, stored, b.RawLen))
		}
		b.StoredLen = uint32(stored)
	}
	if seq != f.Records {
		return r.corrupt(foff, -1, fmt.Errorf("%w: footer counts %d records, its index %d", ErrCorrupt, f.Records, seq))
	}
	f.SummaryBytes = slen
	r.footer, r.end = f, bend
	return nil
}

// blockAfter returns the index of the first block of the footer's index that
// starts after off, len(Blocks) when there is none.
func (f *Footer) blockAfter(off int64) int {
	return sort.Search(len(f.Blocks), func(i int) bool { return f.Blocks[i].Offset > off })
}

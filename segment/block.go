package segment

import "encoding/binary"

// Block is one decoded block: its description and its records. A Block owns
// its buffers, so one goroutine can read the next block into another Block
// while this one's records are being used. The zero value is ready for
// Reader.ReadBlock, which reuses its storage.
type Block struct {
	info  BlockInfo
	base  int64
	start int      // first record to return (after a Seek into the block)
	raw   []byte   // the block's records, checked by the Reader
	offs  []uint32 // where each record starts in raw
	pay   []uint32 // where each record's payload starts in raw
}

// Info describes the block.
func (b *Block) Info() BlockInfo { return b.info }

// Len returns the number of records to use: all of the block's records, or
// those from the position a Seek asked for.
func (b *Block) Len() int { return len(b.offs) - b.start }

// Record returns the i-th record to use, 0 <= i < Len. Its Headers and
// Payload point into the block and stay valid until the Block is reused.
func (b *Block) Record(i int) Record {
	j := b.start + i
	p, _ := recordAt(b.raw, int(b.offs[j]), b.pay[j])
	return Record{
		Seq:     b.info.FirstSeq + uint64(j),
		Time:    b.base + p.delta,
		Headers: Headers{n: p.nh, b: p.hdr},
		Payload: p.payload,
	}
}

// Next returns the position just after the block: where reading resumes
// once all of its records are handled.
func (b *Block) Next() Position {
	return Position{Offset: b.info.End(), Seq: b.info.FirstSeq + uint64(b.info.Count)}
}

// ReadBlock reads the next intact block into b, like NextBlock, but into b's
// own buffers instead of the Reader's. It returns io.EOF at the end and a
// *CorruptError for a damaged block, after which the next call goes on with
// the next intact block. Do not mix it with Next on the same Reader.
func (r *Reader) ReadBlock(b *Block) error {
	// Let the reader decode into b's buffers, then hand them over.
	r.raw, b.raw = b.raw[:0], r.raw
	r.pay, b.pay = b.pay[:0], r.pay
	err := r.loadBlock()
	r.raw, b.raw = b.raw, r.raw
	r.pay, b.pay = b.pay, r.pay
	if err != nil {
		b.offs, b.start = b.offs[:0], 0
		r.dropBlock()
		return err
	}
	// Index where the records start (4 bytes each, where decoded records
	// would take 64) so that Record finds them in any order.
	b.info, b.base, b.start = r.cur, r.recBase, r.ri
	// r.blk is the start of the buffer b now owns; keep its whole capacity
	// so the next, slightly larger, block fits without a new allocation.
	b.raw = b.raw[:len(r.blk)]
	if cap(b.offs) < r.nrec {
		b.offs = make([]uint32, 0, r.nrec) // the records are there: checked
	}
	b.offs = b.offs[:0]
	for pos := 0; len(b.offs) < r.nrec; {
		b.offs = append(b.offs, uint32(pos))
		bodyLen, n := binary.Uvarint(r.blk[pos:])
		pos += n + int(bodyLen)
	}
	r.dropBlock()
	return nil
}

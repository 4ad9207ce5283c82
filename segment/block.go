package segment

import (
	"fmt"
	"iter"
	"sync/atomic"
)

// Block is one decoded block: its description and its records, in one buffer
// of the block's raw size that the records' Headers and Payload point into
// (no copy per record). Besides that buffer a Block keeps one 4-byte offset
// every 16 records, so its memory is at most 1.1 times the block's raw size
// however many records it holds.
//
// A Block comes from Reader.ReadBlock or Stream.Next. It may be read by
// several goroutines at once. Its memory is never overwritten while records
// refer to it (see Release and StreamOptions.Reuse for the one exception):
// a record, or an item sharing a record's bytes, that is kept after the
// block is done with keeps the whole buffer alive.
type Block struct {
	info  BlockInfo
	base  int64
	start int      // first record to return (after a Seek into the block)
	raw   []byte   // the block's records, checked by the Reader
	index []uint32 // offset of every indexStride-th record in raw

	st     atomic.Pointer[stream] // the stream to give the block back to
	charge int64                  // what the block counts for in st's budget
}

// Info describes the block.
func (b *Block) Info() BlockInfo { return b.info }

// Len returns the number of records to use: all of the block's records, or
// those from the position a Seek asked for.
func (b *Block) Len() int { return int(b.info.Count) - b.start }

// Record returns the i-th record to use, 0 <= i < Len; it panics outside that
// range. It walks from the nearest indexed record, up to 15 of them; Records
// is cheaper for going through them all.
func (b *Block) Record(i int) Record {
	j := b.start + i
	if i < 0 || j >= int(b.info.Count) {
		panic(fmt.Sprintf("dlqdump: segment: Block.Record(%d) of a block of %d records", i, b.Len()))
	}
	k := j / indexStride
	off := int(b.index[k])
	for range j - k*indexStride {
		off = skipRecord(b.raw, off)
	}
	p, _ := recordAt(b.raw, off)
	return b.record(j, &p)
}

// Records returns an iterator over the records to use, in order: those of
// Record(0) to Record(Len()-1).
func (b *Block) Records() iter.Seq[Record] {
	return func(yield func(Record) bool) {
		j, n := b.start, int(b.info.Count)
		if j >= n {
			return
		}
		k := j / indexStride
		off := int(b.index[k])
		for range j - k*indexStride {
			off = skipRecord(b.raw, off)
		}
		raw, seq, base := b.raw, b.info.FirstSeq, b.base
		for ; j < n; j++ {
			// recordAt, by hand: this loop is the restorer's per-record
			// work.
			var bodyLen, ux, nh uint64
			i := off
			if c := raw[i]; c < 0x80 {
				bodyLen, i = uint64(c), i+1
			} else {
				bodyLen, i = readUvarint(raw, i)
			}
			end := i + int(bodyLen)
			if c := raw[i]; c < 0x80 {
				ux, i = uint64(c), i+1
			} else {
				ux, i = readUvarint(raw, i)
			}
			if c := raw[i]; c < 0x80 {
				nh, i = uint64(c), i+1
			} else {
				nh, i = readUvarint(raw, i)
			}
			pay := i
			for range 2 * nh {
				if c := raw[pay]; c < 0x80 {
					pay += 1 + int(c)
				} else {
					l, k := readUvarint(raw, pay)
					pay = k + int(l)
				}
			}
			if !yield(Record{
				Seq:     seq + uint64(j),
				Time:    base + (int64(ux>>1) ^ -int64(ux&1)),
				Headers: Headers{n: int(nh), b: raw[i:pay:pay]},
				Payload: raw[pay:end:end],
			}) {
				return
			}
			off = end
		}
	}
}

func (b *Block) record(j int, p *parsedRecord) Record {
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

// Mem returns the bytes of the block's buffer: what a record or item kept
// from the block keeps alive.
func (b *Block) Mem() int { return cap(b.raw) }

// Release tells the Stream the block came from that the consumer is done
// with it: its bytes no longer count against the stream's read-ahead
// (StreamOptions.ReadAhead), so a further block may be decoded. The block
// must not be used after Release. Its records' memory is left to the garbage
// collector, so records and items that share it stay valid, unless the
// stream was made with StreamOptions.Reuse. Release is safe to call from any
// goroutine, more than once, after the stream is closed, and on a Block that
// did not come from a stream (it does nothing then).
func (b *Block) Release() {
	if st := b.st.Swap(nil); st != nil {
		st.release(b)
	}
}

// ReadBlock reads the next intact block into b, like NextBlock. It returns
// io.EOF at the end and a *CorruptError for a damaged block, after which the
// next call goes on with the next intact block; b then holds no records. Do
// not mix it with Next on the same Reader.
//
// The records end in new memory, one allocation of the block's raw size: the
// records of the block b held before stay valid, for as long as something
// refers to them. b's index storage is reused. For several blocks decoded
// ahead on other goroutines, use a Stream.
func (r *Reader) ReadBlock(b *Block) error {
	b.Release()
	b.raw, b.start, b.info = nil, 0, BlockInfo{}
	r.dropBlock()
	j, err := r.nextJob()
	if err != nil {
		return err
	}
	if err := r.openJob(&j); err != nil {
		return err
	}
	raw, index, scratch, err := decodeFresh(&j, r.raw, b.index)
	r.raw = scratch
	b.index = index[:0]
	if err != nil {
		return r.corrupt(j.info.Offset, j.idx, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	b.info, b.base, b.start = j.info, j.base, j.skip
	b.raw, b.index = raw, index
	return nil
}

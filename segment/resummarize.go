package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// AddSummary writes to w a copy of the sealed segment r reads with a
// summary of its records (summary.go), for segments written without one
// (before summaries, or with a Queue's NoSummary): id and created replace
// the header's (the copy is a new segment, published under a new name), its
// CopyOf keeps r's Origin, so every record keeps its ID, and every block is
// copied byte for byte at the same offset, so that a position in r (a
// restore's progress) is the same position in the copy. An encrypted
// segment needs its key (ReaderOptions.Keys): its records are read to be
// summarized, and the summary is sealed under its block key with the nonce
// counter 2^32-1, which no Writer takes. A damaged block, an unsealed
// segment or an encrypted one read without its key is an error, and what
// was written to w is then to be discarded. r is read from its start; do
// not use it meanwhile.
func AddSummary(w io.Writer, r *Reader, id ID, created time.Time) error {
	ft := r.footer
	if ft == nil {
		return fmt.Errorf("dlqdump: segment %s: summarize a sealed segment only: %w", r.name, r.footerErr)
	}
	if r.hdr.Encrypted && r.seal == nil {
		return fmt.Errorf("dlqdump: segment %s: summarize it with its key: %w", r.name, r.keyErr)
	}
	h := r.hdr
	h.ID, h.Created, h.CopyOf, h.Summarized = id, created, r.hdr.Origin(), true
	b := make([]byte, HeaderSize, r.start)
	if h.Encrypted {
		b = appendKeySection(b, &r.salt, r.wrapped)
	}
	if int64(len(b)) != r.start {
		return fmt.Errorf("%w: segment %s: a header of %d bytes, written again as %d", ErrFormat, r.name, r.start, len(b))
	}
	h.marshal(b, len(b))
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("dlqdump: write segment header: %w", err)
	}
	if err := r.Seek(Position{}); err != nil {
		return err
	}
	acc := &sumAcc{}
	var blk Block
	var sum blockSum
	var buf []byte
	for i, bi := range ft.Blocks {
		err := r.ReadBlock(&blk)
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: segment %s: %d blocks read, its footer lists %d", ErrCorrupt, r.name, i, len(ft.Blocks))
		}
		if err != nil {
			return fmt.Errorf("dlqdump: segment %s: not summarized: %w", r.name, err)
		}
		if got := blk.Info(); got.Offset != bi.Offset || got.Count != bi.Count {
			return fmt.Errorf("%w: segment %s: block %d at offset %d, its footer says %d", ErrCorrupt, r.name, i, got.Offset, bi.Offset)
		}
		sum.build(blk.raw, int(bi.Count))
		acc.add(&sum)
		n := int(BlockHeaderSize + bi.StoredLen) // checked against the segment's size
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if got, err := r.src.ReadAt(buf, bi.Offset); got < n {
			return r.ioError(bi.Offset, n, err)
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("dlqdump: write block at offset %d: %w", bi.Offset, err)
		}
	}
	var minT, maxT int64
	if ft.Records > 0 {
		minT, maxT = ft.MinTime.UnixNano(), ft.MaxTime.UnixNano()
	}
	var counter uint32
	if r.seal != nil {
		counter = math.MaxUint32
	}
	section := acc.encode(summaryBudget(ft.StoredBytes), r.seal, counter)
	fb := appendFooter(section, ft.Blocks, ft.Records, ft.RawBytes, ft.StoredBytes, minT, maxT, ft.Sealed, len(section))
	if _, err := w.Write(fb); err != nil {
		return fmt.Errorf("dlqdump: write segment footer: %w", err)
	}
	return nil
}

package segment

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Rewrap writes to w a copy of the sealed, encrypted segment that r reads,
// with its data key wrapped anew (key rotation): wrapped replaces the wrapped
// key of the key section, and id and created the header's (the copy is a
// new segment, published under a new name); the data version, the salt and
// so the block key, and every block stay as they are, byte for byte: no
// record is decrypted or sealed again. The caller makes wrapped from r's
// DataKey. The footer is written again with its offsets moved by the
// difference in size of the two key sections, which Rewrap returns: a
// position in r (a restore's progress) is that position plus shift in the
// copy.
//
// Every block is verified before it is copied (VerifyBlock: its checksum,
// and its authentication when r was opened with the key); a damaged block,
// an unsealed segment or one that is not encrypted is an error, and what
// was written to w is then to be discarded. r is read from its start; do
// not use it meanwhile.
func Rewrap(w io.Writer, r *Reader, id ID, created time.Time, wrapped []byte) (shift int64, err error) {
	if !r.hdr.Encrypted {
		return 0, fmt.Errorf("%w: segment %s is not encrypted: nothing to rewrap", ErrFormat, r.name)
	}
	ft := r.footer
	if ft == nil {
		return 0, fmt.Errorf("dlqdump: segment %s: rewrap a sealed segment only: %w", r.name, r.footerErr)
	}
	if len(wrapped) == 0 || len(wrapped) > MaxWrappedKey {
		return 0, fmt.Errorf("%w: wrapped data key of %d bytes, want 1 to %d", ErrFormat, len(wrapped), MaxWrappedKey)
	}
	h := r.hdr
	h.ID, h.Created, h.CopyOf = id, created, r.hdr.Origin() // the records keep their IDs
	b := make([]byte, HeaderSize, HeaderSize+keySectionFixed+len(wrapped))
	b = appendKeySection(b, &r.salt, wrapped)
	h.marshal(b, len(b))
	shift = int64(len(b)) - r.start
	if _, err := w.Write(b); err != nil {
		return 0, fmt.Errorf("dlqdump: write segment header: %w", err)
	}
	if err := r.Seek(Position{}); err != nil {
		return 0, err
	}
	index := make([]BlockInfo, 0, len(ft.Blocks))
	var buf []byte
	for {
		bi, err := r.VerifyBlock()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("dlqdump: segment %s: not rewrapped: %w", r.name, err)
		}
		n := int(BlockHeaderSize + bi.StoredLen) // checked against the segment's size
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if got, err := r.src.ReadAt(buf, bi.Offset); got < n {
			return 0, r.ioError(bi.Offset, n, err)
		}
		if _, err := w.Write(buf); err != nil {
			return 0, fmt.Errorf("dlqdump: write block at offset %d: %w", bi.Offset+shift, err)
		}
		bi.Offset += shift
		index = append(index, bi)
	}
	if len(index) != len(ft.Blocks) {
		return 0, fmt.Errorf("%w: segment %s: %d blocks read, its footer lists %d", ErrCorrupt, r.name, len(index), len(ft.Blocks))
	}
	var minT, maxT int64
	if ft.Records > 0 {
		minT, maxT = ft.MinTime.UnixNano(), ft.MaxTime.UnixNano()
	}
	// The summary, sealed under the same block key, is copied as it is.
	var fb []byte
	if n := ft.SummaryBytes; n > 0 {
		fb = make([]byte, n)
		if got, err := r.src.ReadAt(fb, r.end); int64(got) < n {
			return 0, r.ioError(r.end, int(n), err)
		}
	}
	fb = appendFooter(fb, index, ft.Records, ft.RawBytes, ft.StoredBytes, minT, maxT, ft.Sealed, int(ft.SummaryBytes))
	if _, err := w.Write(fb); err != nil {
		return 0, fmt.Errorf("dlqdump: write segment footer: %w", err)
	}
	return shift, nil
}

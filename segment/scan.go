package segment

import (
	"errors"
	"io"
)

// ScanResult describes the intact prefix of a segment, as found by Scan.
type ScanResult struct {
	// Header is the segment's header.
	Header Header
	// Sealed reports whether the segment has a valid footer.
	Sealed bool
	// Blocks are the intact blocks from the start, up to the first damage.
	Blocks []BlockInfo
	// Records counts the records in Blocks.
	Records uint64
	// End is the offset just past the last intact block of the prefix.
	End int64
	// Size is the size of the segment.
	Size int64
	// Damage is the first damage found after the prefix, nil when the
	// prefix reaches the footer (or the end of an unsealed segment).
	Damage error
}

// Scan reads the segment in src block by block, verifying every block, and
// returns its intact prefix. An unsealed segment whose prefix is its whole
// content can be sealed by truncating it at End and calling Seal. A segment
// whose header is damaged is an error.
func Scan(src io.ReaderAt, size int64, opts *ReaderOptions) (*ScanResult, error) {
	r, err := NewReader(src, size, opts)
	if err != nil {
		return nil, err
	}
	res := &ScanResult{Header: r.Header(), Sealed: r.Sealed(), End: r.Start(), Size: size}
	for {
		b, err := r.scanNext()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				return nil, err
			}
			res.Damage = err
			return res, nil
		}
		res.Blocks = append(res.Blocks, b)
		res.Records += uint64(b.Count)
		res.End = b.End()
	}
}

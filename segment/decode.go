package segment

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// zstdDecoders holds decoders for blocks of at most MaxBlockSize raw bytes.
// DecodeAll decodes into the caller's buffer, which is also its history, so a
// decoder holds no block-sized memory between calls.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxBlockSize),
		zstd.WithDecoderMaxWindow(MaxBlockSize),
		zstd.WithDecodeAllCapLimit(true),
		zstd.IgnoreChecksum(true))
	if err != nil {
		panic("dlqdump: zstd decoder options: " + err.Error())
	}
	return d
}}

// checkRawLen checks rawLen against the size the stored bytes of a block of
// codec say they decode to, when they say it, so that no buffer is allocated
// for a raw length the block cannot have. sized reports that they say it:
// always for none and S2, and for the zstd frames this package writes.
func checkRawLen(codec Codec, stored []byte, rawLen int) (sized bool, err error) {
	switch codec {
	case CodecNone:
		if len(stored) != rawLen {
			return true, fmt.Errorf("raw block of %d bytes, header says %d", len(stored), rawLen)
		}
	case CodecZstd:
		var h zstd.Header
		if err := h.Decode(stored); err != nil {
			return false, fmt.Errorf("zstd: %w", err)
		}
		if !h.HasFCS {
			return false, nil
		}
		if h.FrameContentSize != uint64(rawLen) {
			return true, fmt.Errorf("zstd block decodes to %d bytes, header says %d", h.FrameContentSize, rawLen)
		}
	case CodecS2:
		n, err := s2.DecodedLen(stored)
		if err != nil {
			return true, fmt.Errorf("s2: %w", err)
		}
		if n != rawLen {
			return true, fmt.Errorf("s2 block decodes to %d bytes, header says %d", n, rawLen)
		}
	}
	return true, nil
}

// decodeSlack is the room left after a block's raw bytes in its decode
// buffer (zstd's compressedBlockOverAlloc is 16).
const decodeSlack = 64

// unsizedStart is the first buffer size tried for a zstd frame that does not
// say its size, per stored byte (and at least 64 KiB).
const unsizedStart = 32

// decodeJob decompresses the block of j and checks its records. It decodes
// into buf when buf is large enough, else into new memory (buf nil: always
// new memory). With wantIndex it fills index, reusing its storage, with the
// offset of every indexStride-th record. It returns the raw bytes, whose
// storage the caller may keep for reuse even when err is set (raw is then
// empty, or nil when nothing was allocated); errors are plain, for the caller
// to wrap with the block's place.
func decodeJob(j *blockJob, buf []byte, index []uint32, wantIndex bool) (raw []byte, _ []uint32, err error) {
	raw, buf, err = decodeBlock(j.info.Codec, j.stored, buf, int(j.info.RawLen), j.fcs)
	if err != nil {
		return buf[:0:cap(buf)], index, err
	}
	index, err = checkRecords(raw, &j.info, j.base, index, wantIndex)
	if err != nil {
		return raw[:0], index, err
	}
	return raw, index, nil
}

// maxScratch is the largest block decodeFresh decodes in a reused buffer
// before copying it out.
const maxScratch = 1 << 20

// decodeFresh is decodeJob into new memory of the block's own, filling index
// (reusing its storage). A block of at most maxScratch raw bytes is decoded
// into scratch, whose memory is in the cache (new memory is not:
// decompressing into it is slower, and Go zeroes it first), checked there,
// and copied out by an append, which does not zero what it copies over. It
// returns scratch, to be passed again.
func decodeFresh(j *blockJob, scratch []byte, index []uint32) (raw []byte, _ []uint32, _ []byte, err error) {
	if int(j.info.RawLen)+decodeSlack > maxScratch {
		raw, index, err = decodeJob(j, nil, index, true)
		return raw, index, scratch, err
	}
	raw, index, err = decodeJob(j, scratch, index, true)
	if cap(raw) > 0 {
		scratch = raw[:0]
	}
	if err != nil {
		return nil, index, scratch, err
	}
	return append([]byte(nil), raw...), index, scratch, nil
}

// grow returns buf if its capacity is at least n, else new memory of n bytes.
func grow(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:0]
	}
	return make([]byte, 0, n) // n is at most the block cap plus slack, checked
}

// decodeBlock decompresses stored, which the block header says decodes to
// rawLen bytes (checked against the caps by the caller and, when sized,
// against what the stored bytes say), into buf or new memory. It returns the
// raw bytes and the storage used; a zstd frame that does not say its size is
// decoded into growing buffers, so that what is allocated follows what the
// frame really decodes to, not what the header claims.
func decodeBlock(codec Codec, stored, buf []byte, rawLen int, sized bool) (out, storage []byte, err error) {
	need := rawLen + decodeSlack
	switch codec {
	case CodecNone:
		if len(stored) != rawLen {
			return nil, buf, fmt.Errorf("raw block of %d bytes, header says %d", len(stored), rawLen)
		}
		buf = grow(buf, need)
		return append(buf, stored...), buf, nil
	case CodecS2:
		n, err := s2.DecodedLen(stored)
		if err != nil {
			return nil, buf, fmt.Errorf("s2: %w", err)
		}
		if n != rawLen {
			return nil, buf, fmt.Errorf("s2 block decodes to %d bytes, header says %d", n, rawLen)
		}
		buf = grow(buf, need)
		out, err := s2.Decode(buf[:rawLen], stored)
		if err != nil {
			return nil, buf, fmt.Errorf("s2: %w", err)
		}
		return out, buf, nil
	case CodecZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		c := need
		if !sized {
			c = min(need, max(64<<10, unsizedStart*len(stored)))
		}
		for {
			buf = grow(buf, c)
			out, err := d.DecodeAll(stored, buf[:0:c])
			if err == nil {
				if len(out) != rawLen {
					return nil, buf, fmt.Errorf("zstd block decodes to %d bytes, header says %d", len(out), rawLen)
				}
				if len(out) > 0 && &out[0] != &buf[:1][0] {
					return out, out[:0], nil // the decoder moved it
				}
				return buf[:len(out)], buf, nil // with all of buf's capacity
			}
			if sized || c >= need || !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return nil, buf, fmt.Errorf("zstd: %w", err)
			}
			c = min(2*c, need)
		}
	}
	return nil, buf, fmt.Errorf("%w: unknown codec %d", ErrFormat, codec)
}

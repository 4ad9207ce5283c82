package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// EncodedBlock is a compressed, checksummed block waiting for its place in a
// segment (Writer.WriteBlock gives it its offset and first sequence number).
// The zero value is ready for Compressor.Encode, which reuses its storage.
type EncodedBlock struct {
	buf       []byte // block header (firstSeq and crc not yet set) + stored bytes
	info      BlockInfo
	storedCRC uint32
	sum       blockSum // set by Summarize
}

// Len returns the size the block takes in a segment, header included.
func (e *EncodedBlock) Len() int { return len(e.buf) }

// Cap returns the capacity of the block's buffer, which Encode reuses.
func (e *EncodedBlock) Cap() int { return cap(e.buf) }

// Count returns the number of records in the block.
func (e *EncodedBlock) Count() int { return int(e.info.Count) }

// RawLen returns the size of the block's records before compression.
func (e *EncodedBlock) RawLen() int { return int(e.info.RawLen) }

// MinTime returns the earliest record time in the block (Unix nanoseconds).
func (e *EncodedBlock) MinTime() int64 { return e.info.MinTime }

// Compressor turns a BlockBuilder's records into an EncodedBlock. It is not
// safe for concurrent use; run one per goroutine.
type Compressor struct {
	codec Codec
	level int
	zenc  *zstd.Encoder
}

// NewCompressor returns a compressor for codec. level 0 is the codec's
// default; for zstd it is a zstd level (1 fastest, 3 default, up to 19, mapped
// to klauspost's four encoder levels); for S2, 1 is Encode, 2 Better, 3 Best.
func NewCompressor(codec Codec, level int) (*Compressor, error) {
	c := &Compressor{codec: codec, level: level}
	switch codec {
	case CodecNone, CodecS2:
	case CodecZstd:
		lvl := zstd.SpeedDefault
		if level != 0 {
			lvl = zstd.EncoderLevelFromZstd(level)
		}
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(lvl),
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderCRC(false), // blocks carry their own CRC32C
			zstd.WithWindowSize(1<<20),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, fmt.Errorf("dlqdump: zstd encoder: %w", err)
		}
		c.zenc = enc
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrFormat, codec)
	}
	return c, nil
}

// Codec returns the compressor's codec.
func (c *Compressor) Codec() Codec { return c.codec }

// Encode compresses the records of b into dst, reusing dst's storage. When
// compression does not make the block smaller the raw bytes are stored.
// dst's storage is sized for the capacity of b's buffer (EncodedCap), not
// only for the records in it: give BlockBuilder.Reset a buffer of the size
// blocks are cut at.
func (c *Compressor) Encode(dst *EncodedBlock, b *BlockBuilder) {
	dst.sum.valid = false // a new block: not summarized yet
	raw := b.raw
	buf := dst.buf[:0]
	// The room is reckoned from the raw buffer's capacity, not from this
	// block's length: blocks are cut at slightly different lengths, and a
	// buffer sized for one would be too small for the next, slightly
	// longer one, and allocated again.
	if want := EncodedCap(c.codec, cap(raw)); cap(buf) < want {
		buf = make([]byte, 0, want)
	}
	buf = buf[:BlockHeaderSize]
	codec := c.codec
	switch codec {
	case CodecZstd:
		buf = c.zenc.EncodeAll(raw, buf)
	case CodecS2:
		switch {
		case c.level >= 3:
			buf = appendS2(buf, raw, s2.EncodeBest)
		case c.level == 2:
			buf = appendS2(buf, raw, s2.EncodeBetter)
		default:
			buf = appendS2(buf, raw, s2.Encode)
		}
	}
	if codec == CodecNone || len(buf)-BlockHeaderSize >= len(raw) {
		codec = CodecNone
		buf = append(buf[:BlockHeaderSize], raw...)
	}
	stored := buf[BlockHeaderSize:]
	dst.info = BlockInfo{
		Count:     b.count,
		RawLen:    uint32(len(raw)),
		StoredLen: uint32(len(stored)),
		Codec:     codec,
		MinTime:   b.min,
		MaxTime:   b.max,
	}
	h := buf[:BlockHeaderSize]
	binary.LittleEndian.PutUint32(h[0:], blockMagic)
	h[4] = blockTypeData
	h[5] = byte(codec)
	binary.LittleEndian.PutUint16(h[6:], 0)
	binary.LittleEndian.PutUint32(h[8:], b.count)
	binary.LittleEndian.PutUint32(h[12:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(h[16:], uint32(len(stored)))
	binary.LittleEndian.PutUint64(h[20:], 0) // firstSeq: set by Writer.WriteBlock
	binary.LittleEndian.PutUint64(h[28:], uint64(b.base))
	binary.LittleEndian.PutUint64(h[36:], uint64(b.min))
	binary.LittleEndian.PutUint64(h[44:], uint64(b.max))
	dst.storedCRC = crc32.Checksum(stored, castag)
	dst.buf = buf
}

// EncodedCap returns the capacity Compressor.Encode gives an encoded block
// of codec whose raw bytes fit rawCap: the whole block plus its header
// without compression; S2's worst case, which S2 writes into (allocated once
// at that size, not grown from half of the block); for zstd half of it, as
// dead letters usually compress 3-6x (a block that does not grows the buffer
// once, and Encode reuses it afterwards).
func EncodedCap(codec Codec, rawCap int) int {
	switch codec {
	case CodecNone:
		return BlockHeaderSize + rawCap
	case CodecS2:
		if n := s2.MaxEncodedLen(rawCap); n > 0 {
			return BlockHeaderSize + n
		}
	}
	return BlockHeaderSize + rawCap/2 + 64
}

func appendS2(dst, src []byte, enc func(dst, src []byte) []byte) []byte {
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		return append(dst, src...) // too large for S2; stored raw
	}
	if cap(dst)-len(dst) < n {
		grown := make([]byte, len(dst), len(dst)+n)
		copy(grown, dst)
		dst = grown
	}
	out := enc(dst[len(dst):len(dst)+n], src)
	return dst[:len(dst)+len(out)]
}

// finish sets the block's first sequence number and checksum in its header.
func (e *EncodedBlock) finish(firstSeq uint64) {
	h := e.buf[:BlockHeaderSize]
	binary.LittleEndian.PutUint64(h[20:], firstSeq)
	crc := crc32.Update(e.storedCRC, castag, h[:56])
	binary.LittleEndian.PutUint32(h[56:], crc)
	e.info.FirstSeq = firstSeq
}

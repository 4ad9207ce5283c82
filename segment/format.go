package segment

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strings"
	"time"
)

// Layout of a segment, format version 1 (version 2, encrypted, is in
// seal.go). All integers are little endian.
//
//	segment  = header block* [[summary] footer trailer]
//	header   = magic[8] formatVersion:u16 codec:u8 flags:u8 headerSize:u32
//	           dataVersion:u64 created:i64 id[16] copyOf[12] crc:u32          (64 bytes)
//	block    = blockMagic:u32 type:u8 codec:u8 flags:u16 count:u32 rawLen:u32
//	           storedLen:u32 firstSeq:u64 baseTime:i64 minTime:i64 maxTime:i64
//	           reserved[4] crc:u32                                           (60 bytes)
//	           stored[storedLen]
//	footer   = blockMagic:u32 type:u8 summaryLen:u24 blocks:u32 records:u64 rawBytes:u64
//	           storedBytes:u64 minTime:i64 maxTime:i64 sealed:i64             (60 bytes)
//	           index[blocks] crc:u32
//	index    = offset:u64 firstSeq:u64 count:u32 rawLen:u32 minTime:i64 maxTime:i64 (40 bytes)
//	trailer  = footerSize:u32 endMagic[8]                                     (12 bytes)
//
// In version 1 the block's flags and reserved bytes are zero; version 2
// (encrypted, seal.go) sets flag bit 0 in the header and the blocks, puts a
// key section between the header and the first block (headerSize counts
// it) and keeps a block's nonce counter in its reserved bytes.
//
// Header flag bit 1 (both versions) says the segment may carry a summary
// (summary.go) between its last block and its footer, summaryLen bytes long
// (0: none, as in every footer written without the flag). Readers that
// predate summaries refuse such a segment (unknown flags) rather than
// taking the summary for damage. copyOf is zero except in a copy that keeps
// its original's record IDs (Header.CopyOf, recordid.go); readers that
// predate it ignore those bytes, reserved then.
//
// The block CRC32C (Castagnoli) covers the stored bytes followed by the first 56
// bytes of the block header (reserved bytes are zero), so a writer can compress and checksum a block before
// it knows the block's place in the segment. Stored bytes are one zstd frame, one
// S2 block or the raw bytes, as the block's codec says. Raw bytes are records:
//
//	record = bodyLen:uvarint timeDelta:varint headerCount:uvarint
//	         (keyLen:uvarint key valueLen:uvarint value)* payload
//
// bodyLen counts every byte after itself; timeDelta is the record's time minus
// the block's baseTime in nanoseconds.
const (
	// FormatVersion is the version of the segment layout this package writes.
	FormatVersion = 1

	// HeaderSize is the size of a segment header.
	HeaderSize = 64
	// BlockHeaderSize is the size of a block header.
	BlockHeaderSize = 60
	// FooterFixedSize is the size of the footer before its index.
	FooterFixedSize = 60
	// IndexEntrySize is the size of one footer index entry.
	IndexEntrySize = 40
	// TrailerSize is the size of the trailer that ends a sealed segment.
	TrailerSize = 12

	// DefaultBlockSize is the raw size a block is cut at by default.
	DefaultBlockSize = 256 << 10
	// MaxRecordSize is the largest record body, headers and payload, a
	// segment may hold. It bounds what a reader allocates for hostile input.
	MaxRecordSize = 64 << 20
	// MaxBlockSize is the largest raw block a reader accepts by default: one
	// maximal record with its framing.
	MaxBlockSize = MaxRecordSize + 64

	// Ext is the file name extension of a sealed segment.
	Ext = ".dlq"
)

const (
	blockTypeData   = 0xB1
	blockTypeFooter = 0xF1
	blockMagic      = 0x42514c44 // "DLQB" little endian
)

var (
	magic    = [8]byte{0x89, 'D', 'L', 'Q', '\r', '\n', 0x1a, '\n'}
	endMagic = [8]byte{'D', 'L', 'Q', 'E', 'N', 'D', '\r', '\n'}
	castag   = crc32.MakeTable(crc32.Castagnoli)
)

// Codec names how the stored bytes of a block are compressed.
type Codec uint8

// Codecs. The codec is recorded in every block, so a reader handles any mix.
const (
	// CodecNone stores raw bytes.
	CodecNone Codec = 0
	// CodecZstd stores one zstd frame (github.com/klauspost/compress/zstd).
	CodecZstd Codec = 1
	// CodecS2 stores one S2 block (github.com/klauspost/compress/s2):
	// several times faster than zstd, larger output.
	CodecS2 Codec = 2
)

// String returns the codec's name: "none", "zstd" or "s2".
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	case CodecS2:
		return "s2"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec returns the codec named s ("none", "zstd" or "s2").
func ParseCodec(s string) (Codec, error) {
	switch strings.ToLower(s) {
	case "none":
		return CodecNone, nil
	case "zstd", "":
		return CodecZstd, nil
	case "s2":
		return CodecS2, nil
	}
	return 0, fmt.Errorf("%w: unknown codec %q (want none, zstd or s2)", ErrFormat, s)
}

func (c Codec) valid() bool { return c <= CodecS2 }

// ID identifies a segment: 6 bytes of Unix milliseconds followed by 10 random
// bytes, so IDs sort roughly by creation time and never collide in practice.
type ID [16]byte

// NewID returns a new ID for a segment created at t.
func NewID(t time.Time) ID {
	var id ID
	ms := uint64(t.UnixMilli())
	id[0], id[1], id[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	id[3], id[4], id[5] = byte(ms>>16), byte(ms>>8), byte(ms)
	_, _ = rand.Read(id[6:]) // crypto/rand.Read never fails on supported platforms.
	return id
}

// String returns the ID in hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// nameTimeLayout sorts lexically in time order.
const nameTimeLayout = "20060102T150405.000000000Z"

// FileName returns the name of a segment created at t with the given ID:
// "<UTC time>-<8 bytes of the random part of id in hex>.dlq". Names sort by
// creation time; two processes never pick the same name in practice.
func FileName(t time.Time, id ID) string {
	return t.UTC().Format(nameTimeLayout) + "-" + hex.EncodeToString(id[8:]) + Ext
}

// ParseFileName returns the creation time encoded in a segment name made by
// FileName. ok is false for any other name.
func ParseFileName(name string) (created time.Time, ok bool) {
	if !strings.HasSuffix(name, Ext) || len(name) != len(nameTimeLayout)+1+16+len(Ext) {
		return time.Time{}, false
	}
	t, err := time.Parse(nameTimeLayout, name[:len(nameTimeLayout)])
	if err != nil || name[len(nameTimeLayout)] != '-' {
		return time.Time{}, false
	}
	if _, err := hex.DecodeString(name[len(nameTimeLayout)+1 : len(name)-len(Ext)]); err != nil {
		return time.Time{}, false
	}
	return t, true
}

// Header is the fixed header at the start of every segment.
type Header struct {
	// FormatVersion is the layout version: FormatVersion, or
	// FormatVersionEncrypted for encrypted segments.
	FormatVersion uint16
	// Codec is the codec the writer was configured with. Each block records
	// its own codec; this one is informational.
	Codec Codec
	// DataVersion is the user's data version (dlqdump.Version) the records
	// were encoded with.
	DataVersion uint64
	// Created is when the segment was started.
	Created time.Time
	// ID identifies the segment.
	ID ID
	// Encrypted reports that the segment's blocks are sealed (format
	// version 2, see seal.go). A Writer sets it when given a DataKey.
	Encrypted bool
	// Summarized reports that the segment may carry a summary before its
	// footer (header flag bit 1, summary.go). A Writer sets it when
	// WriterOptions.Summarize is set.
	Summarized bool
	// CopyOf, when not zero, is the Origin of the segment this one is a
	// byte-for-byte copy of, records at the same sequence numbers (Rewrap
	// sets it): its records keep that segment's IDs (see Origin). Zero
	// (the default): the segment is its own origin.
	CopyOf Origin
}

// marshal writes the fixed header; size is the header's size with its key
// section.
func (h *Header) marshal(b []byte, size int) {
	_ = b[HeaderSize-1]
	copy(b[0:8], magic[:])
	binary.LittleEndian.PutUint16(b[8:], h.FormatVersion)
	b[10] = byte(h.Codec)
	b[11] = 0
	if h.Encrypted {
		b[11] = flagEncrypted
	}
	if h.Summarized {
		b[11] |= flagSummary
	}
	binary.LittleEndian.PutUint32(b[12:], uint32(size))
	binary.LittleEndian.PutUint64(b[16:], h.DataVersion)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.Created.UnixNano()))
	copy(b[32:48], h.ID[:])
	copy(b[48:60], h.CopyOf[:])
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castag))
}

// unmarshalHeader parses and verifies the fixed header and returns it and
// the header's size, its key section included (checked against the caps,
// not against the segment's size). The error says what is wrong; the caller
// wraps it with the segment name and offset.
func unmarshalHeader(b []byte) (h Header, size int64, err error) {
	if len(b) < HeaderSize {
		return h, 0, fmt.Errorf("%w: header is %d bytes, want %d", ErrCorrupt, len(b), HeaderSize)
	}
	if [8]byte(b[0:8]) != magic {
		return h, 0, fmt.Errorf("%w: bad magic %q, not a dlqdump segment", ErrFormat, b[0:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[60:]), crc32.Checksum(b[:60], castag); got != want {
		return h, 0, fmt.Errorf("%w: header checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	h.FormatVersion = binary.LittleEndian.Uint16(b[8:])
	size = int64(binary.LittleEndian.Uint32(b[12:]))
	flags := b[11]
	h.Summarized = flags&flagSummary != 0
	flags &^= flagSummary
	switch h.FormatVersion {
	case FormatVersion:
		if flags != 0 {
			return h, 0, fmt.Errorf("%w: flags %#x in a version %d header", ErrFormat, flags, FormatVersion)
		}
		if size != HeaderSize {
			return h, 0, fmt.Errorf("%w: header size %d, want %d", ErrFormat, size, HeaderSize)
		}
	case FormatVersionEncrypted:
		if flags != flagEncrypted {
			return h, 0, fmt.Errorf("%w: flags %#x in a version %d header, want %#x (encrypted)", ErrFormat, flags, FormatVersionEncrypted, flagEncrypted)
		}
		// Refused before the key section is read or anything allocated
		// for it.
		if size < HeaderSize+keySectionFixed+1 || size > HeaderSize+keySectionFixed+MaxWrappedKey {
			return h, 0, fmt.Errorf("%w: header size %d: a key section of %d bytes is impossible (at most %d)",
				ErrCorrupt, size, size-HeaderSize, keySectionFixed+MaxWrappedKey)
		}
		h.Encrypted = true
	default:
		return h, 0, fmt.Errorf("%w: format version %d, this reader knows %d and %d", ErrFormat, h.FormatVersion, FormatVersion, FormatVersionEncrypted)
	}
	h.Codec = Codec(b[10])
	h.DataVersion = binary.LittleEndian.Uint64(b[16:])
	h.Created = time.Unix(0, int64(binary.LittleEndian.Uint64(b[24:]))).UTC()
	copy(h.ID[:], b[32:48])
	copy(h.CopyOf[:], b[48:60])
	return h, size, nil
}

// BlockInfo describes one block: its place in the segment and its records.
// The footer's index is a list of BlockInfo.
type BlockInfo struct {
	// Offset is where the block header starts in the segment.
	Offset int64
	// FirstSeq is the sequence number of the block's first record; records
	// are numbered from 0 in each segment.
	FirstSeq uint64
	// Count is the number of records in the block.
	Count uint32
	// RawLen is the size of the records before compression.
	RawLen uint32
	// StoredLen is the size of the block's payload as stored (not counting
	// its header).
	StoredLen uint32
	// Codec is how the stored bytes are compressed.
	Codec Codec
	// MinTime and MaxTime bound the records' times (Unix nanoseconds).
	MinTime, MaxTime int64
}

// End returns the offset just past the block.
func (b *BlockInfo) End() int64 { return b.Offset + BlockHeaderSize + int64(b.StoredLen) }

// Footer summarises a sealed segment.
type Footer struct {
	// Blocks is the block index, in order. The index does not record
	// codecs, so their Codec is zero; their StoredLen is what lies between
	// one block's header and the next block.
	Blocks []BlockInfo
	// Records is the number of records in the segment.
	Records uint64
	// RawBytes and StoredBytes are the totals over all blocks' records
	// before compression and as stored.
	RawBytes, StoredBytes uint64
	// MinTime and MaxTime bound the records' times; both are zero in an
	// empty segment.
	MinTime, MaxTime time.Time
	// Sealed is when the footer was written.
	Sealed time.Time
	// SummaryBytes is the size of the segment's summary (Reader.Summary),
	// 0 when it has none.
	SummaryBytes int64
}

// footerSize returns the size of a footer with n index entries, trailer included.
func footerSize(n int) int64 {
	return FooterFixedSize + int64(n)*IndexEntrySize + 4 + TrailerSize
}

// Package segment is dlqdump's on-disk format, version 1: the one codec used
// by every sink (fs, s3), the Restorer and the dlqdump command.
//
// A segment is a 64-byte header (magic, format version, codec, the user's data
// Version, creation time, a 128-bit ID, CRC32C), blocks of records, and, once
// sealed, a footer that indexes the blocks (offsets, sequence numbers, record
// counts, time ranges, totals) followed by a trailer. Each block is one zstd
// frame (or S2 block, or raw bytes, as its header says) of length-prefixed
// records, with a CRC32C over its header and stored bytes. A record is the
// time it entered the dump, its headers and its payload. See format.go for
// the exact layout.
//
// Writing: a Writer takes records (Add, AddRecord, Copy) and cuts them into
// blocks, or takes blocks compressed elsewhere (WriteBlock, as the dumper's
// compressors do), and Close seals the segment with its footer.
//
// Reading: a Reader reads through an io.ReaderAt, one block at a time, so its
// memory is bounded by a block and never by the segment; every checksum is
// verified and every length is checked against caps and the bytes that remain
// before anything is allocated, and zstd's memory and window are limited. On
// damage it returns a *CorruptError naming the segment and the offset, then
// goes on with the next intact block, so the records of every intact block
// are still read. A segment without a valid footer (its writer died) is
// unsealed but readable block by block; Scan finds its intact prefix and Seal
// completes it.
//
// Blocks: Reader.ReadBlock and a Stream return each block as a Block, one
// buffer of the block's raw bytes that its records point into, without a copy
// per record. A Stream reads blocks ahead and decodes them on several
// goroutines, delivering them in order; the consumer releases each block when
// done. Reading ahead is bounded in bytes (StreamOptions.ReadAhead).
//
// Encryption at rest: a Writer given a DataKey (WriterOptions.Key) writes an
// encrypted segment, format version 2: its header is followed by a key
// section holding the data key wrapped for the segment's recipients, and
// every block is sealed with AES-256-GCM after compression, its header
// authenticated; the checksums cover the sealed bytes. A Reader unwraps the
// key with ReaderOptions.Keys; without it the header, footer and checksums
// are read (VerifyBlock, Scan) and reading records returns an error wrapping
// ErrNoKey, never sealed bytes. A block that fails authentication is damage,
// a *CorruptError, like a bad checksum. Rewrap copies an encrypted segment
// with its key wrapped anew, its blocks unchanged. See seal.go for the
// layout.
//
// Bounds on hostile input: memory never depends on the number of records (a
// Reader keeps no per-record state, a Block one 4-byte offset per 16
// records), so what reading a segment holds at once is about one block of at
// most ReaderOptions.MaxBlockSize raw bytes (64 MiB by default, which every
// segment written by this package fits), plus what a Stream reads ahead. The
// work is linear in the raw bytes, and looking for intact blocks after damage
// is bounded by twice the segment's size. ReaderOptions.MaxExpansion bounds
// the raw bytes by a multiple of the segment's size, for segments that are
// not trusted to hold only realistic data: then memory and work follow the
// file's bytes, however small its records.
package segment

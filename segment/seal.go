package segment

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Encryption at rest. An encrypted segment (format version 2) has a key
// section after its 64-byte header, and every block's stored bytes sealed
// with AES-256-GCM after compression:
//
//	header     = as version 1, with formatVersion 2, flags bit 0 set and
//	             headerSize = 64 + the key section's size
//	keySection = keyMagic[4] alg:u8 reserved[3] salt[16] wrappedLen:u32
//	             wrapped[wrappedLen] crc:u32
//	block      = as version 1, with flags bit 0 set, the nonce counter in the
//	             four bytes before the CRC (reserved in version 1), and
//	             stored = AES-256-GCM(compressed bytes) || tag[16]
//
// wrapped is the segment's data key wrapped for its recipients, opaque here
// (package envelope writes an age file holding the key). The block key is
// HKDF-SHA256(dataKey, salt, "dlqdump block key v1" || dataVersion:u64);
// salt is random for every Writer, so no two Writers ever share a block key,
// even when they share a data key (the side segments of a segment, a
// rewrapped copy) or an ID. The nonce is the counter, 4 bytes little endian,
// then 8 zero bytes: a Writer counts every block it seals, a block written
// again after a failed write included, so a nonce is never used twice under
// one block key. The authenticated data is the block header's first 56
// bytes (all of it but the CRC), so a block's counts, sequence numbers,
// times, codec and lengths cannot be changed or the block moved between
// segments of other keys. The CRC32C covers the sealed bytes, so checksums
// are verified without the key.
//
// Not encrypted: the header (data version, creation time, ID), the block
// headers and the footer (block index, record counts, sizes and time
// ranges). The footer is not authenticated either (a process without the
// key seals a segment its writer left open); the block headers it indexes
// are, so a Reader with the key reports a footer that does not match them
// and reads the blocks as they are, and records missing between blocks are
// damage (the writer numbers them without gaps). Nothing records how many
// blocks a segment had: its last ones can be cut off, and the rest sealed
// again, as deleting the segment can.
const (
	// FormatVersionEncrypted is the layout version of encrypted segments.
	FormatVersionEncrypted = 2
	// KeySize is the size of a data key (AES-256).
	KeySize = 32
	// TagSize is what sealing adds to a block's stored bytes.
	TagSize = 16
	// MaxWrappedKey caps the wrapped data key a segment header may hold;
	// a larger one is refused before anything is allocated for it.
	MaxWrappedKey = 32 << 10

	keySectionFixed = 4 + 1 + 3 + 16 + 4 + 4
	saltSize        = 16
	algAESGCM       = 1
	flagEncrypted   = 1 // header flags
	flagSummary     = 2 // header flags: summary.go
	blockSealed     = 1 // block flags
	nonceSize       = 12
	blockKeyInfo    = "dlqdump block key v1"
)

var keyMagic = [4]byte{'D', 'L', 'Q', 'K'}

// ErrNoKey means a segment is encrypted and its data key could not be
// unwrapped: no identity was given, or none of those given matches.
var ErrNoKey = errors.New("dlqdump: no key for encrypted segment")

// NoKeyError is an ErrNoKey saying which segment and why, in one message
// that begins with ErrNoKey's: "dlqdump: no key for encrypted segment:
// segment S: DETAIL". A key unwrapper returns it without the segment, which
// the Reader fills in.
type NoKeyError struct {
	Segment string // the segment's name; "" when not known
	Detail  string // e.g. "no identity given"
	Tried   int    // identities tried: 0 when none was given
}

// Error describes the segment and the detail after ErrNoKey's message.
func (e *NoKeyError) Error() string {
	msg := ErrNoKey.Error()
	if e.Segment != "" {
		msg += ": segment " + e.Segment
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns ErrNoKey.
func (e *NoKeyError) Unwrap() error { return ErrNoKey }

// DataKey is the key of an encrypted segment: Key, KeySize random bytes,
// seals its blocks; Wrapped, stored in the segment's header, is Key wrapped
// for the segment's recipients (package envelope makes both). String and
// GoString never show the key.
type DataKey struct {
	Key     []byte
	Wrapped []byte
}

// String returns a description without the key.
func (k DataKey) String() string {
	return fmt.Sprintf("segment.DataKey{Key: [%d bytes], Wrapped: [%d bytes]}", len(k.Key), len(k.Wrapped))
}

// GoString is String: the key is never printed.
func (k DataKey) GoString() string { return k.String() }

func (k *DataKey) check() error {
	if len(k.Key) != KeySize {
		return fmt.Errorf("%w: data key of %d bytes, want %d", ErrFormat, len(k.Key), KeySize)
	}
	if len(k.Wrapped) == 0 || len(k.Wrapped) > MaxWrappedKey {
		return fmt.Errorf("%w: wrapped data key of %d bytes, want 1 to %d", ErrFormat, len(k.Wrapped), MaxWrappedKey)
	}
	return nil
}

// KeyUnwrapper unwraps the data key of an encrypted segment from the wrapped
// bytes its header holds. UnwrapKey returns an error wrapping ErrNoKey when
// none of its identities matches, one wrapping ErrCorrupt when the wrapped
// bytes are malformed or fail authentication, and any other error (a key
// service that cannot be reached) when trying again may help. It may be
// called by several goroutines at once; ctx bounds what it waits for (a
// key service).
type KeyUnwrapper interface {
	UnwrapKey(ctx context.Context, wrapped []byte) (key []byte, err error)
}

// KeySectionSize returns the size of the key section of an encrypted
// segment whose wrapped data key takes wrappedLen bytes: what its header
// takes beyond HeaderSize.
func KeySectionSize(wrappedLen int) int { return keySectionFixed + wrappedLen }

// appendKeySection appends the key section of a segment.
func appendKeySection(dst []byte, salt *[saltSize]byte, wrapped []byte) []byte {
	start := len(dst)
	dst = append(dst, keyMagic[:]...)
	dst = append(dst, algAESGCM, 0, 0, 0)
	dst = append(dst, salt[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(wrapped)))
	dst = append(dst, wrapped...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castag))
}

// parseKeySection parses a key section, b being all of it (its size comes
// from the header, checked against MaxWrappedKey). The wrapped key it
// returns points into b.
func parseKeySection(b []byte) (salt [saltSize]byte, wrapped []byte, err error) {
	if len(b) < keySectionFixed+1 {
		return salt, nil, fmt.Errorf("%w: key section of %d bytes is too short", ErrCorrupt, len(b))
	}
	n := len(b) - 4
	if got, want := binary.LittleEndian.Uint32(b[n:]), crc32.Checksum(b[:n], castag); got != want {
		return salt, nil, fmt.Errorf("%w: key section checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if [4]byte(b[:4]) != keyMagic {
		return salt, nil, fmt.Errorf("%w: no key section magic", ErrCorrupt)
	}
	if b[4] != algAESGCM || b[5]|b[6]|b[7] != 0 {
		return salt, nil, fmt.Errorf("%w: unknown encryption algorithm %d", ErrFormat, b[4])
	}
	copy(salt[:], b[8:24])
	if wl := binary.LittleEndian.Uint32(b[24:]); int64(wl) != int64(len(b)-keySectionFixed) {
		return salt, nil, fmt.Errorf("%w: wrapped key length %d does not match the key section's %d bytes", ErrCorrupt, wl, len(b))
	}
	return salt, b[28:n:n], nil
}

// sealer seals and opens the blocks of one segment under its block key.
// Its methods are safe for concurrent use (a cipher.AEAD from crypto/aes
// keeps no state between calls).
type sealer struct {
	aead cipher.AEAD
}

// newSealer derives the block key from a data key, the segment's salt and
// its data version.
func newSealer(key []byte, salt *[saltSize]byte, dataVersion uint64) (*sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: data key of %d bytes, want %d", ErrFormat, len(key), KeySize)
	}
	info := binary.LittleEndian.AppendUint64([]byte(blockKeyInfo), dataVersion)
	bk, err := hkdf.Key(sha256.New, key, salt[:], string(info), KeySize)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: derive block key: %w", err)
	}
	c, err := aes.NewCipher(bk)
	clear(bk)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: block cipher: %w", err)
	}
	aead, err := cipher.NewGCM(c)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: block cipher: %w", err)
	}
	return &sealer{aead: aead}, nil
}

func blockNonce(counter uint32) [nonceSize]byte {
	var n [nonceSize]byte
	binary.LittleEndian.PutUint32(n[:], counter)
	return n
}

// seal appends the sealed plain to dst; hdr is the block header's first 56
// bytes, complete, with the counter in them.
func (s *sealer) seal(dst, hdr, plain []byte, counter uint32) []byte {
	n := blockNonce(counter)
	return s.aead.Seal(dst, n[:], plain, hdr)
}

// open appends the plaintext of sealed to dst.
func (s *sealer) open(dst, hdr, sealed []byte, counter uint32) ([]byte, error) {
	n := blockNonce(counter)
	out, err := s.aead.Open(dst, n[:], sealed, hdr)
	if err != nil {
		return nil, errors.New("sealed block fails authentication (tampered, or the key section was replaced)")
	}
	return out, nil
}

// newSalt returns a random salt for a Writer's block key.
func newSalt() (s [saltSize]byte) {
	_, _ = rand.Read(s[:]) // crypto/rand.Read never fails on supported platforms.
	return s
}

// openJob opens the sealed stored bytes of j into dst (dst may be
// j.stored[:0], to open in place; any other dst must not overlap them) and
// checks the raw length against what the plaintext says, as checkJob does
// for blocks that are not sealed. On success j.stored is the plaintext. It
// returns the storage the plaintext took, dst or new memory, for the caller
// to keep for the next block: never the stored bytes, which a failed open
// leaves where they were (in a Reader's read window).
func openJob(s *sealer, j *blockJob, dst []byte) (storage []byte, err error) {
	plain, err := s.open(dst, j.aad[:], j.stored, j.counter)
	if err != nil {
		return dst[:0], err
	}
	j.stored = plain
	fcs, err := checkRawLen(j.info.Codec, plain, int(j.info.RawLen))
	j.fcs = fcs
	return plain[:0], err
}

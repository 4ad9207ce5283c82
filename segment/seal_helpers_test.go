package segment

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"testing"
)

// testDataKey returns a data key made from seed, wrapped as "test-wrap:"
// and the hex of a hash of the key, which testKeys recognises.
func testDataKey(seed string) *DataKey {
	k := sha256.Sum256([]byte("key " + seed))
	id := sha256.Sum256(k[:])
	return &DataKey{Key: k[:], Wrapped: []byte("test-wrap:" + hex.EncodeToString(id[:8]))}
}

// testKeys unwraps the wrapped keys of the data keys it holds: another
// test-wrap key is ErrNoKey, anything else ErrCorrupt.
type testKeys []*DataKey

func (ks testKeys) UnwrapKey(_ context.Context, wrapped []byte) ([]byte, error) {
	for _, k := range ks {
		if bytes.Equal(k.Wrapped, wrapped) {
			return bytes.Clone(k.Key), nil
		}
	}
	if bytes.HasPrefix(wrapped, []byte("test-wrap:")) {
		return nil, fmt.Errorf("%w: no test identity for %q", ErrNoKey, wrapped)
	}
	return nil, fmt.Errorf("%w: wrapped key %q is not a test key", ErrCorrupt, wrapped)
}

// wrongKeys unwraps every key to the wrong one.
type wrongKeys struct{}

func (wrongKeys) UnwrapKey(context.Context, []byte) ([]byte, error) {
	return bytes.Repeat([]byte{7}, KeySize), nil
}

// fuzzKey is the key of the encrypted segments the fuzz targets read.
var fuzzKey = testDataKey("fuzz")

// encryptedSegment writes recs into an encrypted segment under key.
func encryptedSegment(t testing.TB, codec Codec, blockSize int, key *DataKey, recs []rec) []byte {
	t.Helper()
	return writeRecords(t, codec, &WriterOptions{BlockSize: blockSize, Key: key}, recs)
}

// craftEncryptedSegment returns the header of a segment encrypted under
// key followed by blocks sealed under it (whatever their fields), unsealed
// (no footer).
func craftEncryptedSegment(t testing.TB, key *DataKey, blocks ...*craftedBlock) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(CodecNone), &WriterOptions{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for i, c := range blocks {
		c2 := *c
		c2.seal, c2.counter = w.seal, uint32(i)
		b = c2.appendTo(b)
	}
	return b
}

// blockAt describes the block at off of a segment: its header and stored
// bytes.
func blockAt(data []byte, off int64) (hdr, stored []byte) {
	hdr = data[off : off+BlockHeaderSize]
	n := int64(binary.LittleEndian.Uint32(hdr[16:]))
	return hdr, data[off+BlockHeaderSize : off+BlockHeaderSize+n]
}

// fixBlockCRC sets the CRC of the block at off to match its bytes, as an
// attacker who changed them would.
func fixBlockCRC(data []byte, off int64) {
	hdr, stored := blockAt(data, off)
	crc := crc32.Update(crc32.Checksum(stored, castag), castag, hdr[:56])
	binary.LittleEndian.PutUint32(hdr[56:], crc)
}

// fixHeaderCRC sets the CRC of the fixed header and, when start is past it,
// of the key section in data[HeaderSize:start].
func fixHeaderCRC(data []byte, start int64) {
	binary.LittleEndian.PutUint32(data[60:], crc32.Checksum(data[:60], castag))
	if start > HeaderSize {
		ks := data[HeaderSize:start]
		binary.LittleEndian.PutUint32(ks[len(ks)-4:], crc32.Checksum(ks[:len(ks)-4], castag))
	}
}

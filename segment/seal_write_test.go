package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// recordingWriter keeps every write, and fails the ones asked for.
type recordingWriter struct {
	buf    bytes.Buffer
	writes [][]byte
	fail   map[int]bool // by write number
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	n := len(w.writes)
	w.writes = append(w.writes, bytes.Clone(p))
	if w.fail[n] {
		return 0, errors.New("injected write failure")
	}
	return w.buf.Write(p)
}

// TestNonceNeverReused writes blocks, some of them failing and written
// again (after a truncation, as the Queue does after a failed write or
// sync), and checks that no two sealed blocks ever written share a nonce,
// whatever reached the store.
func TestNonceNeverReused(t *testing.T) {
	t.Parallel()
	key := testDataKey("a")
	w := &recordingWriter{fail: map[int]bool{2: true, 3: true, 6: true}}
	sw, err := NewWriter(w, testHeader(CodecZstd), &WriterOptions{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCompressor(CodecZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := testRecords(60)
	var eb EncodedBlock
	for i := 0; i < 6; i++ {
		var bb BlockBuilder
		for _, r := range recs[i*10 : i*10+10] {
			bb.Add(r.t, append(AppendHeaders(nil, r.headers), r.payload...))
		}
		c.Encode(&eb, &bb)
		size := sw.Size()
		for sw.WriteBlock(&eb) != nil {
			if err := sw.Truncate(size); err != nil {
				t.Fatal(err)
			}
			w.buf.Truncate(int(size))
		}
	}
	// A sync failed: the last two blocks are cut off and written again.
	cut := sw.index[3].Offset
	if err := sw.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	w.buf.Truncate(int(cut))
	for i := 3; i < 6; i++ {
		var bb BlockBuilder
		for _, r := range recs[i*10 : i*10+10] {
			bb.Add(r.t, append(AppendHeaders(nil, r.headers), r.payload...))
		}
		c.Encode(&eb, &bb)
		if err := sw.WriteBlock(&eb); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]int{}
	for i, p := range w.writes[1:] {
		if len(p) < BlockHeaderSize || binary.LittleEndian.Uint32(p) != blockMagic || p[4] != blockTypeData {
			continue
		}
		ctr := binary.LittleEndian.Uint32(p[52:])
		if j, ok := seen[ctr]; ok {
			t.Fatalf("writes %d and %d seal blocks under nonce %d", j, i+1, ctr)
		}
		seen[ctr] = i + 1
	}
	if len(seen) != 6+3+3 {
		t.Fatalf("%d blocks sealed, want 12", len(seen))
	}
	readAllRecordsOpts(t, w.buf.Bytes(), recs, &ReaderOptions{Keys: testKeys{key}})
}

// TestSameKeyNewSalt writes the same records under the same data key and
// ID twice (as side segments and a side segment written again do): the
// sealed bytes differ, so no nonce is reused under one block key.
func TestSameKeyNewSalt(t *testing.T) {
	t.Parallel()
	key := testDataKey("a")
	recs := testRecords(50)
	a := encryptedSegment(t, CodecNone, 1<<20, key, recs)
	b := encryptedSegment(t, CodecNone, 1<<20, key, recs)
	ra, rb := open(t, a, nil), open(t, b, nil)
	ba, bb := ra.Footer().Blocks[0], rb.Footer().Blocks[0]
	_, sa := blockAt(a, ba.Offset)
	_, sb := blockAt(b, bb.Offset)
	if bytes.Equal(sa[:32], sb[:32]) {
		t.Fatal("two writers sealed the same block under the same key stream")
	}
	readAllRecordsOpts(t, a, recs, &ReaderOptions{Keys: testKeys{key}})
	readAllRecordsOpts(t, b, recs, &ReaderOptions{Keys: testKeys{key}})
}

// TestRewrap rewraps a segment's key for another identity: the blocks are
// copied byte for byte, the new identity reads the records, the old one no
// longer opens it, and positions move by the shift.
func TestRewrap(t *testing.T) {
	t.Parallel()
	oldKey := testDataKey("old")
	recs := testRecords(300)
	data := encryptedSegment(t, CodecZstd, 2048, oldKey, recs)
	r := open(t, data, &ReaderOptions{Keys: testKeys{oldKey}})
	dk := r.DataKey()
	for _, wrapped := range [][]byte{[]byte("test-wrap:n"), bytes.Repeat([]byte("test-wrap:long"), 100)} {
		newKey := &DataKey{Key: dk.Key, Wrapped: wrapped}
		var out bytes.Buffer
		id := NewID(time.Now())
		shift, err := Rewrap(&out, r, id, r.Header().Created.Add(time.Millisecond), wrapped)
		if err != nil {
			t.Fatal(err)
		}
		c := readAllRecordsOpts(t, out.Bytes(), recs, &ReaderOptions{Keys: testKeys{newKey}})
		if c.Header().ID != id || c.Start()-r.Start() != shift || !bytes.Equal(c.WrappedKey(), wrapped) {
			t.Fatalf("copy: header %+v, start %d (was %d, shift %d)", c.Header(), c.Start(), r.Start(), shift)
		}
		oldEnd := int64(len(data)) - footerSize(len(r.Footer().Blocks))
		newEnd := int64(out.Len()) - footerSize(len(c.Footer().Blocks))
		if !bytes.Equal(data[r.Start():oldEnd], out.Bytes()[c.Start():newEnd]) {
			t.Fatal("the blocks changed")
		}
		if _, err := NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()), &ReaderOptions{Keys: testKeys{oldKey}}); !errors.Is(err, ErrNoKey) {
			t.Fatalf("the old identity on the copy: %v", err)
		}
		// A position in the original is the position plus shift in the copy.
		b := r.Footer().Blocks[3]
		if err := c.Seek(Position{Offset: b.Offset + shift, Seq: b.FirstSeq + 2}); err != nil {
			t.Fatal(err)
		}
		rec, err := c.Next()
		if err != nil || rec.Seq != b.FirstSeq+2 {
			t.Fatalf("after the shift: record %d, %v", rec.Seq, err)
		}
		checkRecord(t, rec, rec.Seq, &recs[rec.Seq])
	}
	// Without the key, checksums are verified and the blocks copied too.
	nk := open(t, data, nil)
	var out bytes.Buffer
	if _, err := Rewrap(&out, nk, NewID(time.Now()), time.Now(), []byte("test-wrap:x")); err != nil {
		t.Fatal(err)
	}
	// A damaged block stops it.
	bad := bytes.Clone(data)
	bad[r.Footer().Blocks[2].Offset+BlockHeaderSize] ^= 1
	if _, err := Rewrap(io.Discard, open(t, bad, nil), NewID(time.Now()), time.Now(), []byte("w")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("rewrap of a damaged segment: %v", err)
	}
	// Not encrypted.
	plain := writeRecords(t, CodecZstd, nil, recs[:3])
	if _, err := Rewrap(io.Discard, open(t, plain, nil), NewID(time.Now()), time.Now(), []byte("w")); !errors.Is(err, ErrFormat) {
		t.Fatalf("rewrap of a segment not encrypted: %v", err)
	}
}

// TestDataKeyNotPrinted checks that formatting a DataKey never shows the key.
func TestDataKeyNotPrinted(t *testing.T) {
	k := testDataKey("secret")
	for _, s := range []string{fmt.Sprint(k), fmt.Sprint(*k), fmt.Sprintf("%+v %#v %v %s", *k, *k, k, k), fmt.Sprintf("%#v", k)} {
		if strings.Contains(s, string(k.Key[:4])) || strings.Contains(s, fmt.Sprint(k.Key[:4])) || strings.Contains(s, fmt.Sprintf("%x", k.Key[:4])) {
			t.Fatalf("key material printed: %s", s)
		}
	}
}

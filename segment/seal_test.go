package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// incompressibleRecords returns records whose payloads do not compress, so
// that blocks are stored raw and sealing makes them larger than raw.
func incompressibleRecords(n int) []rec {
	recs := testRecords(n)
	p := newPRNG(99)
	for i := range recs {
		recs[i].payload = make([]byte, 100+i%50)
		p.fill(recs[i].payload)
	}
	return recs
}

// TestEncryptedRoundTrip writes encrypted segments of every codec, and
// reads them back with the key through Next, ReadBlock and Streams.
func TestEncryptedRoundTrip(t *testing.T) {
	t.Parallel()
	key := testDataKey("a")
	for _, codec := range allCodecs {
		for _, recs := range [][]rec{testRecords(300), incompressibleRecords(60), nil} {
			data := encryptedSegment(t, codec, 2048, key, recs)
			opts := &ReaderOptions{Name: "enc.dlq", Keys: testKeys{key}}
			r := readAllRecordsOpts(t, data, recs, opts)
			h := r.Header()
			if !h.Encrypted || h.FormatVersion != FormatVersionEncrypted {
				t.Fatalf("%s: header %+v, want encrypted, version %d", codec, h, FormatVersionEncrypted)
			}
			if r.Start() <= HeaderSize || !bytes.Equal(r.WrappedKey(), key.Wrapped) || r.KeyError() != nil {
				t.Fatalf("%s: start %d, wrapped %q, key error %v", codec, r.Start(), r.WrappedKey(), r.KeyError())
			}
			if dk := r.DataKey(); dk == nil || !bytes.Equal(dk.Key, key.Key) {
				t.Fatalf("%s: DataKey() = %v", codec, dk)
			}
			checkStream(t, data, opts)
			for _, b := range r.Footer().Blocks {
				hdr, stored := blockAt(data, b.Offset)
				if binary.LittleEndian.Uint16(hdr[6:])&blockSealed == 0 || len(stored) < TagSize+1 {
					t.Fatalf("%s: block at %d not sealed", codec, b.Offset)
				}
			}
			// No payload is stored in clear.
			for _, rc := range recs {
				if len(rc.payload) >= 16 && bytes.Contains(data, rc.payload[:16]) {
					t.Fatalf("%s: a payload is in the segment in clear", codec)
				}
			}
		}
	}
}

// TestEncryptedWithoutKey reads an encrypted segment without its key: the
// header, footer and checksums are read, the records never.
func TestEncryptedWithoutKey(t *testing.T) {
	t.Parallel()
	key := testDataKey("a")
	recs := testRecords(200)
	data := encryptedSegment(t, CodecZstd, 2048, key, recs)
	const name = "nokey.dlq"
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Sealed() || r.Footer().Records != uint64(len(recs)) || !r.Header().Encrypted || r.DataKey() != nil {
		t.Fatalf("sealed %v, footer %+v, header %+v", r.Sealed(), r.Footer(), r.Header())
	}
	checkNoKey := func(what string, err error) {
		t.Helper()
		var ce *CorruptError
		if !errors.Is(err, ErrNoKey) || errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: %v, want an error wrapping ErrNoKey naming %s", what, err, name)
		}
	}
	checkNoKey("KeyError", r.KeyError())
	for range 3 {
		_, err := r.Next()
		checkNoKey("Next", err)
	}
	var b Block
	checkNoKey("ReadBlock", r.ReadBlock(&b))
	_, err = r.NextBlock()
	checkNoKey("NextBlock", err)
	st := NewStream(r, nil)
	_, err = st.Next(context.Background())
	checkNoKey("Stream.Next", err)
	st.Close()

	// Checksums are verified without the key.
	r = open(t, data, &ReaderOptions{Name: name})
	var n uint64
	for {
		bi, err := r.VerifyBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += uint64(bi.Count)
	}
	if n != uint64(len(recs)) {
		t.Fatalf("VerifyBlock found %d records, want %d", n, len(recs))
	}
	res, err := Scan(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: name})
	if err != nil || !res.Sealed || res.Damage != nil || res.Records != uint64(len(recs)) {
		t.Fatalf("Scan without key: %+v, %v", res, err)
	}
	// A damaged block is found without the key.
	bad := bytes.Clone(data)
	bad[r.Footer().Blocks[1].Offset+BlockHeaderSize+3] ^= 1
	r = open(t, bad, &ReaderOptions{Name: name})
	var damaged int
	for {
		_, err := r.VerifyBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			checkCorruptError(t, err, name)
			damaged++
		}
	}
	if damaged != 1 {
		t.Fatalf("VerifyBlock without key found %d damaged blocks, want 1", damaged)
	}
}

// TestEncryptedWrongKey reads with identities that do not match, and with
// one that unwraps a wrong key: a clear error or damage, never records.
func TestEncryptedWrongKey(t *testing.T) {
	t.Parallel()
	data := encryptedSegment(t, CodecS2, 1024, testDataKey("a"), testRecords(100))
	const name = "wrong.dlq"
	_, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: name, Keys: testKeys{testDataKey("b")}})
	var ce *CorruptError
	if !errors.Is(err, ErrNoKey) || errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
		t.Fatalf("other identity: %v, want ErrNoKey naming the segment", err)
	}
	// A key service failing is neither damage nor a missing key.
	_, err = NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: name, Keys: failingKeys{}})
	if err == nil || errors.Is(err, ErrNoKey) || errors.As(err, &ce) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("failing key service: %v", err)
	}
	// The wrong key: every block fails authentication.
	r := open(t, data, &ReaderOptions{Name: name, Keys: wrongKeys{}})
	errs := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err == nil {
			t.Fatal("a record read under the wrong key")
		}
		checkCorruptError(t, err, name)
		if !strings.Contains(err.Error(), "authentication") {
			t.Fatalf("wrong key: %v", err)
		}
		errs++
	}
	if errs != len(r.Footer().Blocks) {
		t.Fatalf("%d errors for %d blocks", errs, len(r.Footer().Blocks))
	}
	checkStream(t, data, &ReaderOptions{Name: name, Keys: wrongKeys{}})
}

type failingKeys struct{}

func (failingKeys) UnwrapKey(context.Context, []byte) ([]byte, error) {
	return nil, errors.New("key service unreachable")
}

// TestEncryptedTamper changes sealed bytes, block headers, the key section
// and the header, each time with checksums made right again, as someone
// who can write to the store would: the reader with the key reports damage
// and returns no record of a changed block.
func TestEncryptedTamper(t *testing.T) {
	t.Parallel()
	key := testDataKey("a")
	recs := testRecords(100)
	data := encryptedSegment(t, CodecZstd, 1024, key, recs)
	ref := open(t, data, &ReaderOptions{Keys: testKeys{key}})
	start, blocks := ref.Start(), ref.Footer().Blocks
	if len(blocks) < 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	const name = "tamper.dlq"
	opts := &ReaderOptions{Name: name, Keys: testKeys{key}}
	// readCount reads all it can and returns the records read and the
	// errors met, checking every record read is the one written.
	readCount := func(t *testing.T, data []byte) (n, errs int) {
		t.Helper()
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), opts)
		if err != nil {
			checkCorruptError(t, err, name)
			return 0, 1
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				return n, errs
			}
			if err != nil {
				checkCorruptError(t, err, name)
				errs++
				continue
			}
			checkRecord(t, rec, rec.Seq, &recs[rec.Seq])
			n++
		}
	}
	b1 := blocks[1]
	cases := []struct {
		name   string
		change func(d []byte)
		all    bool // every block is refused
	}{
		{"sealed byte", func(d []byte) { d[b1.Offset+BlockHeaderSize+5] ^= 0x20; fixBlockCRC(d, b1.Offset) }, false},
		{"tag byte", func(d []byte) { d[b1.End()-1] ^= 1; fixBlockCRC(d, b1.Offset) }, false},
		{"max time", func(d []byte) { d[b1.Offset+44] ^= 1; fixBlockCRC(d, b1.Offset) }, false},
		{"codec", func(d []byte) { d[b1.Offset+5] = byte(CodecS2); fixBlockCRC(d, b1.Offset) }, false},
		{"nonce counter", func(d []byte) { d[b1.Offset+52] ^= 1; fixBlockCRC(d, b1.Offset) }, false},
		{"salt", func(d []byte) { d[HeaderSize+10] ^= 1; fixHeaderCRC(d, start) }, true},
		{"data version", func(d []byte) { d[16] ^= 1; fixHeaderCRC(d, start) }, true},
		{"blocks swapped", func(d []byte) { swapBlocks(d, blocks[0], blocks[1]) }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := bytes.Clone(data)
			c.change(d)
			n, errs := readCount(t, d)
			if errs == 0 || c.all && n != 0 || !c.all && n >= len(recs) {
				t.Fatalf("read %d of %d records with %d errors", n, len(recs), errs)
			}
			// The same damage is invisible to checksums only.
			if c.name != "blocks swapped" {
				r := open(t, d, &ReaderOptions{Name: name})
				for {
					_, err := r.VerifyBlock()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("without the key, %s changed with its checksum fixed is found: %v", c.name, err)
					}
				}
			}
		})
	}
}

// swapBlocks exchanges two blocks of the same size in d, with their
// sequence numbers, checksums and the footer's index left as they were.
func swapBlocks(d []byte, a, b BlockInfo) {
	x, y := bytes.Clone(d[a.Offset:a.End()]), bytes.Clone(d[b.Offset:b.End()])
	if len(x) != len(y) {
		// Only the stored bytes, then.
		n := min(len(x), len(y)) - BlockHeaderSize
		copy(d[a.Offset+BlockHeaderSize:], y[BlockHeaderSize:BlockHeaderSize+n])
		fixBlockCRC(d, a.Offset)
		return
	}
	copy(d[a.Offset:], y)
	copy(d[b.Offset:], x)
}

// TestEncryptedDowngrade strips the encryption from a segment's header, or
// the sealed flag from its blocks, checksums fixed: the sealed bytes are
// never returned as records.
func TestEncryptedDowngrade(t *testing.T) {
	t.Parallel()
	key := testDataKey("a")
	for _, codec := range allCodecs {
		recs := testRecords(80)
		if codec == CodecNone {
			recs = incompressibleRecords(40)
		}
		data := encryptedSegment(t, codec, 1024, key, recs)
		ref := open(t, data, &ReaderOptions{Keys: testKeys{key}})
		start, blocks := ref.Start(), ref.Footer().Blocks
		// A version 1 header, the key section dropped.
		plain := append(bytes.Clone(data[:HeaderSize]), data[start:]...)
		binary.LittleEndian.PutUint16(plain[8:], FormatVersion)
		plain[11] = 0
		binary.LittleEndian.PutUint32(plain[12:], HeaderSize)
		fixHeaderCRC(plain, HeaderSize)
		// The blocks' flags cleared too.
		bare := bytes.Clone(plain)
		for _, b := range blocks {
			off := b.Offset - start + HeaderSize
			binary.LittleEndian.PutUint16(bare[off+6:], 0)
			fixBlockCRC(bare, off)
		}
		// Blocks not sealed in an encrypted segment.
		unsealed := bytes.Clone(data)
		for _, b := range blocks {
			binary.LittleEndian.PutUint16(unsealed[b.Offset+6:], 0)
			fixBlockCRC(unsealed, b.Offset)
		}
		for what, d := range map[string][]byte{"header": plain, "header and blocks": bare, "blocks": unsealed} {
			for _, keys := range []KeyUnwrapper{nil, testKeys{key}} {
				r, err := NewReader(bytes.NewReader(d), int64(len(d)), &ReaderOptions{Name: "down.dlq", Keys: keys})
				if err != nil {
					checkCorruptError(t, err, "down.dlq")
					continue
				}
				for {
					rec, err := r.Next()
					if err == io.EOF {
						break
					}
					if err == nil {
						t.Fatalf("%s, %s stripped: record %d returned: %q", codec, what, rec.Seq, rec.Payload)
					}
					if keys == nil && errors.Is(err, ErrNoKey) {
						break
					}
					checkCorruptError(t, err, "down.dlq")
				}
			}
			// And a reader that takes encrypted segments only refuses
			// the stripped ones whole.
			if what != "blocks" {
				_, err := NewReader(bytes.NewReader(d), int64(len(d)), &ReaderOptions{Name: "down.dlq", RequireEncrypted: true})
				if !errors.Is(err, ErrUnencrypted) {
					t.Fatalf("RequireEncrypted: %v", err)
				}
			}
		}
	}
}

// TestHostileKeySection gives readers headers whose key section is huge,
// truncated or malformed: each is refused as damage, before anything of
// its claimed size is allocated.
func TestHostileKeySection(t *testing.T) {
	key := testDataKey("a")
	data := encryptedSegment(t, CodecZstd, 1024, key, testRecords(20))
	start := open(t, data, nil).Start()
	setSize := func(d []byte, n uint32) []byte {
		binary.LittleEndian.PutUint32(d[12:], n)
		fixHeaderCRC(d, HeaderSize)
		return d
	}
	cases := map[string][]byte{
		"size 4 GiB":     setSize(bytes.Clone(data), 0xFFFFFFFF),
		"size over cap":  setSize(bytes.Clone(data), HeaderSize+keySectionFixed+MaxWrappedKey+1),
		"size too small": setSize(bytes.Clone(data), HeaderSize+keySectionFixed),
		"size 64":        setSize(bytes.Clone(data), HeaderSize),
		"truncated":      bytes.Clone(data[:start-1]),
		"header only":    bytes.Clone(data[:HeaderSize]),
		"wrapped length": func() []byte {
			d := bytes.Clone(data)
			binary.LittleEndian.PutUint32(d[HeaderSize+24:], 1<<31)
			fixHeaderCRC(d, start)
			return d
		}(),
		"magic":           func() []byte { d := bytes.Clone(data); d[HeaderSize] = 'X'; fixHeaderCRC(d, start); return d }(),
		"algorithm":       func() []byte { d := bytes.Clone(data); d[HeaderSize+4] = 9; fixHeaderCRC(d, start); return d }(),
		"wrapped garbage": func() []byte { d := bytes.Clone(data); d[HeaderSize+30] = 0; fixHeaderCRC(d, start); return d }(),
		"key section crc": func() []byte { d := bytes.Clone(data); d[start-1] ^= 1; return d }(),
		"flags, version 1": func() []byte {
			d := bytes.Clone(data)
			binary.LittleEndian.PutUint16(d[8:], 1)
			fixHeaderCRC(d, HeaderSize)
			return d
		}(),
	}
	for what, d := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := NewReader(bytes.NewReader(d), int64(len(d)), &ReaderOptions{Name: "hostile.dlq", Keys: testKeys{key}})
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: accepted", what)
		}
		checkCorruptError(t, err, "hostile.dlq")
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Fatalf("%s: refusing it allocated %d bytes", what, n)
		}
	}
}

// TestEncryptedSweeps runs the truncation and bit-flip sweeps on encrypted
// segments of every codec: every length and 1,000 sets of flipped bits with
// DLQDUMP_FULL=1 (cmd/dlqdump-reliability's "full tests"), CI's sample of
// the lengths (sweepSegment.cuts) and the first 250 sets otherwise.
func TestEncryptedSweeps(t *testing.T) {
	t.Parallel()
	key := testDataKey("sweep")
	for i, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			t.Parallel()
			s := newSweepSegmentKey(t, codec, key, testKeys{key})
			for _, cut := range s.cuts() {
				s.check(t, &damage{cut: cut})
			}
			for _, d := range bitFlips(s, flipSets(1000), uint64(i)+50) {
				s.check(t, &d)
			}
		})
	}
}

package segment

import (
	"bytes"
	"encoding/binary"
	"maps"
	"strings"
	"testing"
	"time"
)

// FuzzRoundTrip writes records made from arbitrary bytes, with any codec
// and block size, and reads them back: they must come back identical.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range roundTripSeeds() {
		f.Add(s.data, s.codec, s.blockSize)
	}
	f.Fuzz(func(t *testing.T, data []byte, codecByte byte, blockSize uint16) {
		fuzzRoundTrip(t, data, codecByte, blockSize)
	})
}

func fuzzRoundTrip(t testing.TB, data []byte, codecByte byte, blockSize uint16) {
	{
		recs := decodeFuzzRecords(data)
		codec := Codec(codecByte % 3)
		opts := &WriterOptions{BlockSize: 1 + int(blockSize), Level: int(codecByte/3) % 5}
		ropts := &ReaderOptions{Name: "test"}
		if codecByte&0x40 != 0 {
			opts.Key, ropts.Keys = fuzzKey, testKeys{fuzzKey}
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(codec), opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if i%2 == 0 {
				err = w.Add(time.Unix(0, r.t), r.headers, r.payload)
			} else {
				err = w.AddRecord(r.t, append(AppendHeaders(nil, r.headers), r.payload...))
			}
			if err != nil {
				t.Fatal(err)
			}
			if codecByte&0x80 != 0 && i%5 == 4 {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data = buf.Bytes()
		r := readAllRecordsOpts(t, data, recs, ropts)
		for i, b := range r.Footer().Blocks {
			if b.Count > 1 && int(b.RawLen) > opts.BlockSize {
				t.Fatalf("block %d: %d records in %d raw bytes, block size %d", i, b.Count, b.RawLen, opts.BlockSize)
			}
		}
		res, err := Scan(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil || !res.Sealed || res.Damage != nil || res.Records != uint64(len(recs)) {
			t.Fatalf("Scan: %+v, %v", res, err)
		}
		// The same records copied into another segment.
		r = readAllRecordsOpts(t, data, recs, ropts)
		if err := r.Seek(Position{}); err != nil {
			t.Fatal(err)
		}
		readAllRecords(t, copyRecords(t, r, nil), recs)
	}
}

// decodeFuzzRecords makes records out of arbitrary bytes. Each record takes
// a control byte: bits 0-1 the number of headers, bit 2 a two-byte payload
// length, bit 3 an 8-byte time (else the time goes up by the byte's value),
// bit 4 a payload repeating its bytes to 16 times its length (up to 1 KiB);
// then the headers (a length byte and bytes for each key and value) and the
// payload. Records stop at 256 or 64 KiB of payloads: the work of an
// execution is bounded by a small multiple of the input's size.
func decodeFuzzRecords(data []byte) []rec {
	take := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n]
		data = data[n:]
		return b
	}
	takeByte := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	var recs []rec
	total := 0 // payload bytes, at most 1 MiB
	t := genBaseTime.UnixNano()
	for len(data) > 0 && len(recs) < 256 {
		ctl := takeByte()
		var headers map[string]string
		if nh := ctl & 3; nh > 0 {
			headers = map[string]string{}
			for range nh {
				k := string(take(takeByte() % 16))
				headers[k] = string(take(takeByte()))
			}
		}
		n := takeByte()
		if ctl&4 != 0 {
			n = n<<8 | takeByte()
		}
		payload := bytes.Clone(take(n))
		if ctl&16 != 0 && len(payload) > 0 && len(payload) <= 1024 {
			payload = bytes.Repeat(payload, 16)
		}
		if total += len(payload); total > 64<<10 {
			break
		}
		if ctl&8 != 0 {
			var b [8]byte
			copy(b[:], take(8))
			t = int64(binary.LittleEndian.Uint64(b[:]))
		} else {
			t += int64(ctl) * 1000
		}
		recs = append(recs, rec{t: t, headers: headers, payload: payload})
	}
	return recs
}

type roundTripSeed struct {
	data      []byte
	codec     byte
	blockSize uint16
}

func roundTripSeeds() []roundTripSeed {
	var seeds []roundTripSeed
	// Records with headers and JSON payloads, as the encoding above reads
	// them.
	var data []byte
	for i := range 6 {
		ctl := byte(i%4) | 4
		if i%5 == 0 {
			ctl |= 8
		}
		if i%7 == 0 {
			ctl |= 16
		}
		data = append(data, ctl)
		for j := range i % 4 {
			k := genReasons[(i+j)%len(genReasons)]
			data = append(data, byte(len(k)))
			data = append(data, k...)
			v := genSources[(i*j)%len(genSources)]
			data = append(data, byte(len(v)))
			data = append(data, v...)
		}
		p := appendJSONRecord(nil, uint64(i), 12+i*5)
		data = append(data, byte(len(p)>>8), byte(len(p)))
		data = append(data, p...)
		if ctl&8 != 0 {
			data = binary.LittleEndian.AppendUint64(data, uint64(genBaseTime.UnixNano()-int64(i)*1e9))
		}
	}
	for c := range byte(3) {
		seeds = append(seeds,
			roundTripSeed{data, c, 4095},
			roundTripSeed{data, c | 0x80, 300},
			roundTripSeed{data[:len(data)/3], c + 3, 0},
			roundTripSeed{data, c | 0x40, 1000}, // encrypted
		)
	}
	seeds = append(seeds,
		roundTripSeed{nil, 1, 100},
		roundTripSeed{[]byte{0, 0}, 2, 1},
		roundTripSeed{[]byte{0x1f, 3, 'a', 'b', 'c', 1, 'x', 0, 0, 1, 'y', 0, 200}, 0, 65535},
		roundTripSeed{[]byte{0x0c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x80}, 1, 7},
	)
	return seeds
}

// TestFuzzRecordsEncoding checks that decodeFuzzRecords decodes the
// encoding it documents.
func TestFuzzRecordsEncoding(t *testing.T) {
	t.Parallel()
	recs := decodeFuzzRecords([]byte{
		0x01, 1, 'k', 2, 'v', 'w', 3, 'a', 'b', 'c',
		0x10, 1, 'z',
		0x0c, 0, 2, 'x', 'y', 1, 2, 3, 4, 5, 6, 7, 0x80,
		0x00, 0,
	})
	if len(recs) != 4 || !maps.Equal(recs[0].headers, map[string]string{"k": "vw"}) || string(recs[0].payload) != "abc" ||
		string(recs[1].payload) != strings.Repeat("z", 16) || recs[1].headers != nil || recs[1].t != recs[0].t+16000 ||
		string(recs[2].payload) != "xy" || uint64(recs[2].t) != 0x8007060504030201 ||
		len(recs[3].payload) != 0 || recs[3].t != recs[2].t {
		t.Fatalf("decodeFuzzRecords: %+v", recs)
	}
}

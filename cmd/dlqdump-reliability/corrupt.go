package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/dlqdump/dlqdump/segment"
)

// corruptionSweep damages many segments at random (bit flips, zeroed runs,
// truncations) and reads them back: no panic, nothing but original records,
// and every block the damage did not touch still yields its records.
func corruptionSweep(o *options) []result {
	trials := 300 * o.rounds / 30
	if o.short {
		trials = 100
	}
	rng := rand.New(rand.NewPCG(31, 32))
	var panics, wrong, missing, recovered, intactTotal, total int
	for trial := range trials {
		codec := []segment.Codec{segment.CodecZstd, segment.CodecS2, segment.CodecNone}[trial%3]
		data, recs := makeSegment(rng, codec)
		total += len(recs)
		bad := bytes.Clone(data)
		var lo, hi int // damaged byte range [lo, hi)
		switch rng.IntN(3) {
		case 0: // bit flips in a small region
			lo = rng.IntN(len(bad))
			hi = min(len(bad), lo+1+rng.IntN(64))
			for range 1 + rng.IntN(8) {
				i := lo + rng.IntN(hi-lo)
				bad[i] ^= 1 << rng.IntN(8)
			}
		case 1: // a zeroed run
			lo = rng.IntN(len(bad))
			hi = min(len(bad), lo+1+rng.IntN(512))
			clear(bad[lo:hi])
		case 2: // truncation
			lo, hi = rng.IntN(len(bad)), len(bad)
			bad = bad[:lo]
		}
		got, panicked := readAll(bad)
		if panicked {
			panics++
			continue
		}
		// Which blocks did the damage leave alone? (from the original's index)
		r, _ := segment.NewReader(bytes.NewReader(data), int64(len(data)), nil)
		intact := map[uint64]bool{}
		headerHit := lo < segment.HeaderSize
		for _, b := range r.Footer().Blocks {
			if !headerHit && (b.End() <= int64(lo) || b.Offset >= int64(hi)) {
				for s := b.FirstSeq; s < b.FirstSeq+uint64(b.Count); s++ {
					intact[s] = true
				}
			}
		}
		intactTotal += len(intact)
		for seq, payload := range got {
			if seq >= uint64(len(recs)) || !bytes.Equal(payload, recs[seq]) {
				wrong++
			}
		}
		for seq := range intact {
			if _, ok := got[seq]; !ok {
				missing++
			}
		}
		recovered += len(got)
	}
	return []result{{
		section: "corruption sweep",
		figures: fmt.Sprintf("%d damaged segments: %d panics, %d wrong records, %d of %d records in untouched blocks missing; %d of %d records recovered",
			trials, panics, wrong, missing, intactTotal, recovered, total),
		bound: "0 panics, 0 wrong, 0 missing",
		ok:    panics == 0 && wrong == 0 && missing == 0,
	}}
}

// makeSegment writes a segment of a few blocks and returns it and its
// records' payloads by sequence number.
func makeSegment(rng *rand.Rand, codec segment.Codec) ([]byte, [][]byte) {
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, segment.Header{Codec: codec}, &segment.WriterOptions{BlockSize: 2048})
	if err != nil {
		panic(err)
	}
	n := 40 + rng.IntN(80)
	recs := make([][]byte, n)
	for i := range recs {
		p := make([]byte, 10+rng.IntN(150))
		for j := range p {
			p[j] = byte('a' + rng.IntN(26))
		}
		recs[i] = p
		if err := w.Add(timeAt(i), map[string]string{"reason": "leak", "i": fmt.Sprint(i)}, p); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes(), recs
}

// readAll reads every record it can, by sequence number; panicked reports a
// panic (which must never happen).
func readAll(data []byte) (got map[uint64][]byte, panicked bool) {
	got = map[uint64][]byte{}
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{MaxBlockSize: 1 << 20})
	if err != nil {
		return got, false
	}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got, false
		}
		var ce *segment.CorruptError
		if errors.As(err, &ce) {
			continue
		}
		if err != nil {
			return got, false
		}
		got[rec.Seq] = bytes.Clone(rec.Payload)
	}
}

func timeAt(i int) time.Time {
	return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
}

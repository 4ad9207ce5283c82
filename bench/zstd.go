package main

import (
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/dlqdump/dlqdump/segment"
)

// keptBlocks is how many compressed blocks the zstd child keeps to decode
// (64 MiB of raw data at the default block size); decoding cycles over them
// until it has decoded as many bytes as the dump compressed.
const keptBlocks = 256

// childZstd measures the ceiling: one core compressing the same items, in
// blocks of the Queue's size, with zstd EncodeAll at the default level and
// the segment writer's options, then decoding them with DecodeAll. Items
// are concatenated into blocks (a copy, as the Queue makes); protobuf
// messages are taken pre-marshalled, so the ceiling does not include
// marshalling.
func childZstd(s *spec, ds *dataSet) (*result, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),
		zstd.WithWindowSize(1<<20),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	type stored struct {
		data []byte
		raw  int
	}
	var kept []stored
	var res result
	res.BaseRSS = startPhase()
	block := make([]byte, 0, segment.DefaultBlockSize+64<<10)
	var dst []byte
	var out int64
	var blocks int
	flush := func() {
		dst = enc.EncodeAll(block, dst[:0])
		out += int64(len(dst))
		blocks++
		if len(kept) < keptBlocks {
			kept = append(kept, stored{data: append([]byte(nil), dst...), raw: len(block)})
		}
		block = block[:0]
	}
	start := time.Now()
	for i := range s.N {
		block = append(block, ds.raw[i%len(ds.raw)]...)
		if len(block) >= segment.DefaultBlockSize {
			flush()
		}
	}
	if len(block) > 0 {
		flush()
	}
	res.Elapsed = time.Since(start)
	res.PeakRSS = peakRSS()
	res.Items, res.Payload = s.N, ds.payload(s.N)
	res.Disk, res.Files = out, blocks
	res.Note = fmt.Sprintf("%d zstd frames, no framing or index", blocks)

	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	var rr result
	rr.BaseRSS = startPhase()
	buf := make([]byte, 0, segment.DefaultBlockSize+64<<10)
	var decoded int64
	start = time.Now()
	for i := 0; decoded < res.Payload; i++ {
		b := kept[i%len(kept)]
		if buf, err = dec.DecodeAll(b.data, buf[:0]); err != nil {
			return nil, err
		}
		decoded += int64(len(buf))
	}
	rr.Elapsed = time.Since(start)
	rr.PeakRSS = peakRSS()
	rr.Items, rr.Payload = s.N, res.Payload
	rr.Note = fmt.Sprintf("DecodeAll of %d distinct blocks, cycled", len(kept))
	res.Restore = &rr
	return &res, nil
}

package dlqdump

import (
	"runtime"

	"github.com/dlqdump/dlqdump/segment"
)

// What the segments in flight hold in memory (docs/MEMORY.md). A segment
// reads its blocks through a segment.Stream, ahead of its deliveries, while
// other segments deliver: the segments in flight share the read-ahead one
// segment had (segment.DefaultReadAhead) and the goroutines decoding it, so
// that together they hold about what one did. A segment with a block that
// does not fit its share (a large BlockSize, records near MaxRecordSize, or
// no footer to tell) is read as one segment at a time was: holding the
// delivery token from its first block to its last, so that at most one such
// block is read at a time, whatever the segments in flight. So is the
// remainder a filtered pass left (restore_remainder.go), read a block at a
// time.

// maxStreamWorkers caps the goroutines that decode a segment's blocks ahead
// of its deliveries: each keeps a decode buffer (up to 1 MiB), so that the
// Restorer's memory follows its configuration, not the machine's cores;
// four decode faster than a destination takes records.
const maxStreamWorkers = 4

func streamWorkers() int { return min(runtime.GOMAXPROCS(0), maxStreamWorkers) }

// minShare is the least read-ahead of a segment among others in flight:
// the block being delivered and the next, of the default size, stored
// uncompressed.
const minShare = 2*(segment.DefaultBlockSize+segment.DefaultBlockSize/64) + 2*streamSlot

// streamSlot is what a segment.Stream counts for a block beyond its bytes
// (its slotCost).
const streamSlot = 512

// streamOptions returns the options of the run's segment.Stream, and
// whether the segment is read alone (its blocks do not fit its share).
func (g *segRun) streamOptions() (opts *segment.StreamOptions, alone bool) {
	n := g.r.segmentsInFlight(g.opts)
	if g.in == nil || n <= 1 {
		return &segment.StreamOptions{Workers: streamWorkers()}, false
	}
	share := max(segment.DefaultReadAhead/n, minShare)
	if !g.fits(int64(share)) {
		return &segment.StreamOptions{Workers: streamWorkers()}, true
	}
	return &segment.StreamOptions{ReadAhead: share, Workers: max(streamWorkers()/n, 1)}, false
}

// fits reports whether each block from the run's position on fits share
// as a segment.Stream counts it (its raw bytes, its index of a 4-byte offset
// per 16 records, its stored bytes when compressed, and its slot): what the
// stream reads ahead of the consumer stays within share. A segment without
// a footer does not tell.
func (g *segRun) fits(share int64) bool {
	ft := g.sr.Footer()
	if ft == nil {
		return false
	}
	for _, b := range ft.Blocks {
		if b.Offset+segment.BlockHeaderSize+int64(b.StoredLen) <= g.prog.Offset {
			continue // before the position
		}
		charge := int64(b.RawLen) + 4*int64((b.Count+15)/16) + streamSlot
		if b.Codec != segment.CodecNone {
			charge += int64(b.StoredLen)
		}
		if charge > share {
			return false
		}
	}
	return true
}

package dlqdump

import (
	"io"
	"sync"

	"github.com/dlqdump/dlqdump/sink"
)

// A dry run before a pass (a restore job's, to say what is left) reads the
// segments the pass then reads again: a small segment is read whole when
// it is opened (segment.Reader's first read takes up to 256 KiB). With
// RunOptions.KeepForPass, a dry run keeps the bytes of the small segments
// it opens, and the Restorer's next Run reads them from memory: it claims
// and opens each segment as before (the store still says the segment is
// there, with its size, so a segment restored and removed meanwhile is
// not delivered again), then reads its bytes from what was kept, which
// are its bytes: a segment is written once and never changes under its
// name (a copy, a rewrap, a summary added is a segment of another name; a
// Move renames it). That Run lets them all go when it returns, and so does
// Close.

// keptMax is the largest segment a dry run keeps: what opening a segment
// reads of it anyway (segment.Reader's read-ahead window).
const keptMax = 256 << 10

// keptBytes bounds the bytes a Restorer keeps from a dry run; the segments
// past it are read again by the pass.
const keptBytes = 4 << 20

// keptKey names a segment's bytes: the area a pass plans it in (a
// quarantine pass's, quarantine, though it is released to the ready area
// to be restored), its name and its size.
type keptKey struct {
	area sink.Area
	name string
	size int64
}

// keptSegments holds the bytes of the segments a dry run kept for the next
// pass.
type keptSegments struct {
	mu    sync.Mutex
	m     map[keptKey][]byte
	bytes int
}

// get returns the bytes kept for k, nil if none.
func (c *keptSegments) get(k keptKey) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// room reports whether n more bytes may be kept.
func (c *keptSegments) room(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return n <= keptMax && int64(c.bytes)+n <= keptBytes
}

// put keeps b for k, unless that exceeds keptBytes.
func (c *keptSegments) put(k keptKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok || c.bytes+len(b) > keptBytes {
		return
	}
	if c.m == nil {
		c.m = map[keptKey][]byte{}
	}
	c.m[k] = b
	c.bytes += len(b)
}

// clear lets every kept segment go.
func (c *keptSegments) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.bytes = nil, 0
}

// keptArea is the area the run's segment is kept under.
func (g *segRun) keptArea() sink.Area {
	if g.opts.Area == AreaQuarantine {
		return sink.AreaQuarantine // released from there
	}
	return sink.AreaReady
}

// keptOrKeep returns f, the run's segment as opened, reading from what a
// dry run kept of it when that is its bytes; in a dry run that keeps
// them, it reads a small segment whole (what its reader's first read would
// take) and keeps it.
func (g *segRun) keptOrKeep(f sink.File) sink.File {
	k := keptKey{area: g.keptArea(), name: g.name, size: f.Size()}
	if b := g.r.kept.get(k); b != nil {
		return keptFile{File: f, b: b}
	}
	if !g.dry || !g.opts.KeepForPass || k.size <= 0 || !g.r.kept.room(k.size) {
		return f
	}
	b := make([]byte, k.size)
	if n, err := f.ReadAt(b, 0); int64(n) != k.size {
		_ = err // the reader meets it again where it reads
		return f
	}
	g.r.kept.put(k, b)
	return keptFile{File: f, b: b}
}

// keptFile is an open segment read from its kept bytes.
type keptFile struct {
	sink.File
	b []byte
}

func (f keptFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/dlqdump/dlqdump/sink"
)

// memSegment is a segment built in memory.
type memSegment struct {
	name      string
	buf       []byte
	commit    func(ctx context.Context, data []byte) error
	sync      error
	committed bool
	aborted   bool
}

// Write appends p to the buffer.
func (m *memSegment) Write(p []byte) (int, error) {
	if m.committed || m.aborted {
		return 0, fmt.Errorf("dlqdump: s3: write to segment %s after Commit or Abort", m.name)
	}
	m.buf = append(m.buf, p...)
	return len(p), nil
}

// Sync cannot make a memory buffer durable.
func (m *memSegment) Sync() error {
	if m.sync != nil {
		return fmt.Errorf("dlqdump: s3: sync segment %s: %w", m.name, m.sync)
	}
	return nil
}

// Truncate cuts the buffer to size bytes.
func (m *memSegment) Truncate(size int64) error {
	if size < 0 || size > int64(len(m.buf)) {
		return fmt.Errorf("dlqdump: s3: truncate segment %s to %d bytes: it has %d", m.name, size, len(m.buf))
	}
	m.buf = m.buf[:size]
	return nil
}

// Commit hands the buffer on (to the spool, or to an upload); it can be
// retried after a failure.
func (m *memSegment) Commit(ctx context.Context) error {
	if m.committed {
		return nil
	}
	if m.aborted {
		return fmt.Errorf("dlqdump: s3: commit segment %s after Abort", m.name)
	}
	if err := m.commit(ctx, m.buf); err != nil {
		return err
	}
	m.committed = true
	m.buf = nil
	return nil
}

// Abort drops the buffer.
func (m *memSegment) Abort() error {
	m.aborted = true
	m.buf = nil
	return nil
}

// dirSegment is a segment built in a file of the spool directory.
type dirSegment struct {
	sw        sink.SegmentWriter // fs.Writer's
	st        *spool
	name      string
	size      int64
	fsDone    bool // committed into the spool directory
	committed bool
}

// Write appends p to the spool file.
func (d *dirSegment) Write(p []byte) (int, error) {
	n, err := d.sw.Write(p)
	d.size += int64(n)
	return n, err
}

// Sync makes the bytes durable in the spool directory.
func (d *dirSegment) Sync() error { return d.sw.Sync() }

// Truncate cuts the spool file to size bytes.
func (d *dirSegment) Truncate(size int64) error {
	if err := d.sw.Truncate(size); err != nil {
		return err
	}
	d.size = size
	return nil
}

// Commit waits for room in the spool, publishes the file in the spool
// directory and queues it for upload.
func (d *dirSegment) Commit(ctx context.Context) error {
	if d.committed {
		return nil
	}
	if !d.fsDone {
		if err := d.st.waitRoom(ctx, d.size); err != nil {
			return err
		}
		if err := d.sw.Commit(ctx); err != nil {
			return err
		}
		d.fsDone = true
	}
	if err := d.st.push(&item{name: d.name, size: d.size, path: filepath.Join(d.st.fsw.Directory, d.name)}); err != nil {
		return fmt.Errorf("dlqdump: s3: segment %s is in the spool directory, to be uploaded on the next start: %w", d.name, err)
	}
	d.committed = true
	return nil
}

// Abort removes the spool file, unless it is committed already.
func (d *dirSegment) Abort() error {
	if d.fsDone {
		return fmt.Errorf("dlqdump: s3: abort segment %s: already committed to the spool", d.name)
	}
	return d.sw.Abort()
}

// Close releases the file without publishing it; Recover seals it later.
func (d *dirSegment) Close() error {
	if c, ok := d.sw.(interface{ Close() error }); ok && !d.fsDone {
		return c.Close()
	}
	return nil
}

// bytesReaderAt reads a byte slice.
type bytesReaderAt []byte

// ReadAt implements io.ReaderAt.
func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("dlqdump: s3: negative offset")
	}
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

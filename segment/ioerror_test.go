package segment

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"testing"
	"time"
)

// A source error wrapping io.EOF must not read as the end of the segment.
func TestSourceEOFIsNotEndOfSegment(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Codec: CodecNone}, &WriterOptions{BlockSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6000 {
		if err := w.Add(time.Unix(0, int64(i)), nil, bytes.Repeat([]byte{'a' + byte(i%26)}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	clean, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := clean.Footer().Blocks
	footer := blocks[len(blocks)-1].End()
	// The header and footer read fine; blocks past the middle do not.
	r, err := NewReader(readerAtFunc(func(p []byte, off int64) (int, error) {
		if off >= int64(len(data))/2 && off < footer {
			return 0, &url.Error{Op: "Get", URL: "http://s3/seg", Err: io.EOF}
		}
		return bytes.NewReader(data).ReadAt(p, off)
	}), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
		n++
	}
	if err == io.EOF || errors.Is(err, io.EOF) {
		t.Fatalf("after %d records: %v matches io.EOF", n, err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || r.AtEnd() || n == 0 || n >= 6000 {
		t.Fatalf("after %d records: %v (AtEnd %v)", n, err, r.AtEnd())
	}
}

type readerAtFunc func(p []byte, off int64) (int, error)

func (f readerAtFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }

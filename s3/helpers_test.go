package s3_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// fastRetry keeps the tests quick.
var fastRetry = s3.Retry{MaxAttempts: 10, BaseDelay: 5 * time.Millisecond, MaxDelay: 100 * time.Millisecond, AttemptTimeout: 5 * time.Second}

// buildSegment returns a sealed segment holding the payloads.
func buildSegment(t *testing.T, created time.Time, codec segment.Codec, payloads ...[]byte) (string, []byte) {
	t.Helper()
	id := segment.NewID(created)
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, segment.Header{Codec: codec, Created: created, ID: id}, &segment.WriterOptions{BlockSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		if err := w.Add(created, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return segment.FileName(created, id), buf.Bytes()
}

// readBack reads every segment of an area through the Reader: the count of
// each payload, the segments' IDs and names.
type readBack struct {
	payloads map[string]int
	ids      map[segment.ID]string
	names    []string
	records  int
}

func readArea(t *testing.T, r *s3.Reader, area sink.Area) *readBack {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	rb := &readBack{payloads: map[string]int{}, ids: map[segment.ID]string{}}
	for si, err := range r.List(ctx, area) {
		if err != nil {
			t.Fatalf("List(%s): %v", area, err)
		}
		rb.names = append(rb.names, si.Name)
		f, err := r.Open(ctx, area, si.Name)
		if err != nil {
			t.Fatalf("Open(%s): %v", si.Name, err)
		}
		if f.Size() != si.Size {
			t.Fatalf("%s: Open size %d, List size %d", si.Name, f.Size(), si.Size)
		}
		sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
		if err != nil {
			t.Fatalf("segment.NewReader(%s): %v", si.Name, err)
		}
		if !sr.Sealed() {
			t.Fatalf("%s is not sealed: %v", si.Name, sr.FooterError())
		}
		if prev, dup := rb.ids[sr.Header().ID]; dup {
			t.Fatalf("segment ID %s stored twice: as %s and %s", sr.Header().ID, prev, si.Name)
		}
		rb.ids[sr.Header().ID] = si.Name
		for {
			rec, err := sr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("read %s: %v", si.Name, err)
			}
			rb.payloads[string(rec.Payload)]++
			rb.records++
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return rb
}

// wantExactlyOnce fails unless every payload in want was read once and
// nothing else was read.
func (rb *readBack) wantExactlyOnce(t *testing.T, want []string) {
	t.Helper()
	for _, p := range want {
		if n := rb.payloads[p]; n != 1 {
			t.Fatalf("record %q stored %d times, want once (%d records in %d segments)", p, n, rb.records, len(rb.names))
		}
	}
	if rb.records != len(want) {
		t.Fatalf("read %d records, want %d", rb.records, len(want))
	}
}

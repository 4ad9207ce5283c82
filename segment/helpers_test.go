package segment

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var allCodecs = []Codec{CodecNone, CodecZstd, CodecS2}

// testHeader returns a fixed segment header for codec.
func testHeader(codec Codec) Header {
	created := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)
	id := ID{0: 1, 5: 2, 6: 0xde, 7: 0xad, 8: 0xbe, 15: 0xef}
	return Header{Codec: codec, DataVersion: 42, Created: created, ID: id}
}

// rec is a record as written, to compare with what is read back.
type rec struct {
	t       int64
	headers map[string]string
	payload []byte
}

// writeRecords writes recs into a sealed segment in memory and returns it.
func writeRecords(t testing.TB, codec Codec, opts *WriterOptions, recs []rec) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(codec), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if err := w.AddRecord(r.t, append(AppendHeaders(nil, r.headers), r.payload...)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) {
		t.Fatalf("Writer.Size() = %d, wrote %d bytes", w.Size(), buf.Len())
	}
	return buf.Bytes()
}

// checkRecord fails the test unless got is want with sequence number seq.
func checkRecord(t testing.TB, got Record, seq uint64, want *rec) {
	t.Helper()
	if got.Seq != seq {
		t.Fatalf("record seq %d, want %d", got.Seq, seq)
	}
	if got.Time != want.t {
		t.Fatalf("record %d: time %d, want %d", seq, got.Time, want.t)
	}
	if !bytes.Equal(got.Payload, want.payload) {
		t.Fatalf("record %d: payload of %d bytes differs from the %d written", seq, len(got.Payload), len(want.payload))
	}
	if !bytes.Equal(AppendRecordHeaders(nil, got.Headers), AppendHeaders(nil, want.headers)) {
		t.Fatalf("record %d: headers %v, want %v", seq, got.Headers.Map(), want.headers)
	}
	if got.Headers.Len() != len(want.headers) {
		t.Fatalf("record %d: %d headers, want %d", seq, got.Headers.Len(), len(want.headers))
	}
}

// readAllRecords reads every record of a segment that must be intact and
// sealed, checking them against want.
func readAllRecords(t testing.TB, data []byte, want []rec) *Reader {
	t.Helper()
	return readAllRecordsOpts(t, data, want, &ReaderOptions{Name: "test"})
}

// readAllRecordsOpts is readAllRecords with a Reader of opts.
func readAllRecordsOpts(t testing.TB, data []byte, want []rec, opts *ReaderOptions) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Sealed() {
		t.Fatalf("segment not sealed: %v", r.FooterError())
	}
	if got := r.Footer().Records; got != uint64(len(want)) {
		t.Fatalf("footer counts %d records, want %d", got, len(want))
	}
	for i := range want {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		checkRecord(t, got, uint64(i), &want[i])
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
	return r
}

// checkCorruptError fails unless err is a *CorruptError for segment name
// wrapping one of the package's sentinels, and returns it.
// copyRecords copies the rest of r's records, with extra headers, into a
// new S2 segment and returns it.
func copyRecords(t testing.TB, r *Reader, extra map[string]string) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, testHeader(CodecS2), nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Copy(&rec, extra); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func checkCorruptError(t testing.TB, err error, name string) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *CorruptError", err, err)
	}
	if ce.Segment != name {
		t.Fatalf("error %v names segment %q, want %q", err, ce.Segment, name)
	}
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsealed) {
		t.Fatalf("error %v wraps none of ErrCorrupt, ErrFormat, ErrTooLarge, ErrUnsealed", err)
	}
	if ce.Err == nil || ce.Error() == "" {
		t.Fatalf("error %#v has no reason", ce)
	}
	return ce
}

// tempFile creates a file in the test's temporary directory.
func tempFile(t testing.TB, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

package main

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// TestWriteReadmeSample writes the dump that docs/CLI-TOUR.md's examples were run
// on, with the real dumper (a dlqdump.Queue into an fs.Writer) and realistic
// generated dead letters, and checks what the README shows of it: three
// segments of 4000 records, by reason 7200 failed, 3600 leak, 1200 deadline.
// It writes to a temporary directory, or, spreading the records over 24
// seconds as the README's sample is, to DLQDUMP_SAMPLE_DIR:
//
//	DLQDUMP_SAMPLE_DIR=/tmp/dlq go test -run TestWriteReadmeSample ./cmd/dlqdump/
func TestWriteReadmeSample(t *testing.T) {
	dir := os.Getenv("DLQDUMP_SAMPLE_DIR")
	spread := dir != ""
	if !spread {
		dir = t.TempDir()
	}
	q, err := dlqdump.NewQueue(&dlqdump.Config{
		Version:       dlqdump.NewVersion(1, 2, 0, 0),
		Capacity:      512 * dlqdump.Kilobyte,
		FlushInterval: time.Hour,
		Writer:        &fs.Writer{Directory: dir},
		Source:        "orders",
	})
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(42)
	errs := []string{"timeout after 5s", "connection reset by peer", "validation failed: amount", "upstream returned 429"}
	for i := range 12000 {
		h := dlqdump.Headers{}
		switch {
		case i%10 < 6:
			h[dlqdump.HeaderReason], h[dlqdump.HeaderError], h[dlqdump.HeaderAttempts] = "failed", errs[i%len(errs)], "3"
		case i%10 < 9:
			h[dlqdump.HeaderReason] = "leak"
		default:
			h[dlqdump.HeaderReason] = "deadline"
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: g.Event(256), Headers: h}); err != nil {
			t.Fatal(err)
		}
		if spread && i%100 == 99 {
			time.Sleep(200 * time.Millisecond) // spread the records over 24s
		}
		if i%4000 == 3999 {
			if err := q.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	rd := &fs.Reader{Directory: dir}
	segments, reasons := 0, map[string]int{}
	for si, err := range rd.List(ctx, sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		segments++
		f, err := rd.Open(ctx, sink.AreaReady, si.Name)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			rec, err := sr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
			v, _ := rec.Headers.Lookup(dlqdump.HeaderReason)
			reasons[string(v)]++
		}
		f.Close()
		if n != 4000 {
			t.Errorf("segment %s holds %d records, want 4000", si.Name, n)
		}
	}
	want := map[string]int{"failed": 7200, "leak": 3600, "deadline": 1200}
	if segments != 3 || !maps.Equal(reasons, want) {
		t.Fatalf("sample dump: %d segments, reasons %v; want 3 segments, reasons %v", segments, reasons, want)
	}
}

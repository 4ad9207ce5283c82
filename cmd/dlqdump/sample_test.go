package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
)

// TestWriteReadmeSample writes the dump that README.md's examples were run
// on, with the real dumper (a dlqdump.Queue into an fs.Writer) and realistic
// generated dead letters. It runs only when DLQDUMP_SAMPLE_DIR names the
// directory to write:
//
//	DLQDUMP_SAMPLE_DIR=/tmp/dlq go test -run TestWriteReadmeSample ./cmd/dlqdump/
func TestWriteReadmeSample(t *testing.T) {
	dir := os.Getenv("DLQDUMP_SAMPLE_DIR")
	if dir == "" {
		t.Skip("set DLQDUMP_SAMPLE_DIR to write the README sample dump")
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
		if i%100 == 99 {
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
}

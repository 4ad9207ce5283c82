package segment_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/dlqdump/dlqdump/segment"
)

// ExampleWriter writes three dead letters into a zstd-compressed segment.
func ExampleWriter() {
	var buf bytes.Buffer // an *os.File in practice
	created := time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)
	w, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecZstd, DataVersion: 1, Created: created}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i, reason := range []string{"timeout", "nack", "poison"} {
		headers := map[string]string{"reason": reason, "attempts": fmt.Sprint(i + 1)}
		payload := fmt.Appendf(nil, `{"order":%d,"status":"failed"}`, 1000+i)
		if err := w.Add(created.Add(time.Duration(i)*time.Second), headers, payload); err != nil {
			log.Fatal(err)
		}
	}
	// Close writes the last block and the footer.
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("records:", w.Records(), "blocks:", w.Blocks())
	fmt.Println("size matches:", w.Size() == int64(buf.Len()))
	fmt.Println("file name:", segment.FileName(created, w.Header().ID)[:27]+"...")
	// Output:
	// records: 3 blocks: 1
	// size matches: true
	// file name: 20250314T092653.000000000Z-...
}

// ExampleReader reads every record of a segment, going on past damage.
func ExampleReader() {
	data := exampleSegment()
	r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Name: "example.dlq"})
	if err != nil {
		log.Fatal(err) // not a segment, or its header is damaged
	}
	fmt.Println("sealed:", r.Sealed(), "records:", r.Footer().Records)
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var ce *segment.CorruptError
		if errors.As(err, &ce) {
			fmt.Println("damaged block at offset", ce.Offset)
			continue // the next call goes on with the next intact block
		}
		if err != nil {
			log.Fatal(err) // I/O error
		}
		reason, _ := rec.Headers.Get("reason")
		fmt.Printf("%d %s reason=%s %s\n", rec.Seq, rec.When().Format(time.TimeOnly), reason, rec.Payload)
	}
	// Output:
	// sealed: true records: 3
	// 0 09:26:53 reason=timeout {"order":1000}
	// 1 09:26:54 reason=nack {"order":1001}
	// 2 09:26:55 reason=poison {"order":1002}
}

// ExampleStream restores a segment as the Restorer does: blocks decoded
// ahead on several goroutines, delivered in order, each released when its
// records are handled; a checkpoint after each block says where to resume.
func ExampleStream() {
	data := exampleSegment()
	r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Name: "example.dlq"})
	if err != nil {
		log.Fatal(err)
	}
	// r.Seek(checkpoint) here resumes where a previous run stopped.
	s := segment.NewStream(r, nil) // GOMAXPROCS workers, 4 MiB read ahead
	defer s.Close()
	var checkpoint segment.Position
	for {
		b, err := s.Next(context.Background())
		var ce *segment.CorruptError
		switch {
		case err == io.EOF: // the bare sentinel: the end of the segment
			fmt.Println("at end:", s.AtEnd(), "resume at:", checkpoint)
			return
		case errors.As(err, &ce):
			fmt.Println("damaged block at offset", ce.Offset)
			continue // the next call goes on with the next intact block
		case err != nil:
			log.Fatal(err) // I/O error or ctx's: stop; resume at checkpoint
		}
		for rec := range b.Records() {
			// To stop here: resume at Position{Offset: b.Info().Offset, Seq: rec.Seq}.
			fmt.Printf("%d %s\n", rec.Seq, rec.Payload)
		}
		checkpoint = b.Next()
		b.Release() // its bytes no longer count against the read-ahead
	}
	// Output:
	// 0 {"order":1000}
	// 1 {"order":1001}
	// 2 {"order":1002}
	// at end: true resume at: {200 3}
}

func exampleSegment() []byte {
	var buf bytes.Buffer
	t := time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)
	w, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecS2}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i, reason := range []string{"timeout", "nack", "poison"} {
		err := w.Add(t.Add(time.Duration(i)*time.Second), map[string]string{"reason": reason}, fmt.Appendf(nil, `{"order":%d}`, 1000+i))
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	return buf.Bytes()
}

package segment_test

import (
	"bytes"
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

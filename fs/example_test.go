package fs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Reading a dump directory by hand: list the ready segments, read each one
// and archive it. dlqdump.Restorer does this given
// Config.Reader = &fs.Reader{Directory: dir}, and more: it claims each segment
// first (so that restorers sharing the directory never restore one segment
// twice), records its progress, and delivers the records.
func ExampleReader() {
	dir, err := os.MkdirTemp("", "dlqdump-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// A Queue with Writer: &fs.Writer{Directory: dir} dumps segments; here
	// one is written by hand.
	created := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	hdr := segment.Header{Codec: segment.CodecZstd, Created: created, ID: segment.NewID(created)}
	sw, err := (&fs.Writer{Directory: dir}).Create(ctx, segment.FileName(created, hdr.ID))
	if err != nil {
		log.Fatal(err)
	}
	w, err := segment.NewWriter(sw, hdr, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if err := w.Add(created, map[string]string{"source": "orders"}, fmt.Appendf(nil, `{"order":%d}`, i)); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	if err := sw.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	rd := &fs.Reader{Directory: dir}
	for si, err := range rd.List(ctx, sink.AreaReady) {
		if err != nil {
			log.Fatal(err)
		}
		f, err := rd.Open(ctx, sink.AreaReady, si.Name)
		if err != nil {
			log.Fatal(err)
		}
		r, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
		if err != nil {
			log.Fatal(err)
		}
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				log.Fatal(err)
			}
			source, _ := rec.Headers.Get("source")
			fmt.Printf("%s: %s\n", source, rec.Payload)
		}
		f.Close()
		if err := rd.Move(ctx, si.Name, sink.AreaReady, sink.AreaArchive, ""); err != nil {
			log.Fatal(err)
		}
	}
	for si, err := range rd.List(ctx, sink.AreaArchive) {
		if err != nil {
			log.Fatal(err)
		}
		created, _ := segment.ParseFileName(si.Name)
		fmt.Println("archived: the segment created at", created.Format(time.RFC3339))
	}
	// Output:
	// orders: {"order":0}
	// orders: {"order":1}
	// orders: {"order":2}
	// archived: the segment created at 2026-11-22T10:15:00Z
}

package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// BenchmarkWriteRecord measures the round trip of one conditional record
// write (PutObject with If-Match on the record's ETag), the request a
// restorer makes after each block to store its checkpoint, one after the
// other as a restorer makes them. Its ns/op against the time a directory
// restore spends per block bounds what one restorer on S3 gets: with one
// write per block on the delivery's path, at most block / (block + ns/op)
// of the directory's rate (docs/SCALING.md).
func BenchmarkWriteRecord(b *testing.B) {
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			if errors.Is(tg.err, s3test.ErrNoVersity) {
				b.Skip(tg.err)
			}
			if tg.err != nil {
				b.Fatal(tg.err)
			}
			r := &s3.Reader{Client: tg.srv.Client(), Bucket: tg.srv.Bucket, Prefix: "b/" + s3test.UniquePrefix(b.Name())}
			ctx := context.Background()
			// About the size of a checkpoint record: owner, token, lease and
			// position in JSON.
			rec := bytes.Repeat([]byte("x"), 240)
			version, err := r.WriteRecord(ctx, "seg.dlq", rec, "")
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				copy(rec, fmt.Sprintf("%08d", i))
				if version, err = r.WriteRecord(ctx, "seg.dlq", rec, version); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

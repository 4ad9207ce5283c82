package s3_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// countingReader returns a Reader of the env whose requests c counts.
func countingReader(e *env, c *s3test.Counter, chunk int) *s3.Reader {
	client := e.srv.Client(func(o *awss3.Options) { o.HTTPClient = c.Wrap(o.HTTPClient) })
	return &s3.Reader{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, ReadChunk: dlqdump.MemorySize(chunk)}
}

// A segment smaller than ReadChunk is opened and read whole in one GET
// (before: a HEAD, then a GET); a larger one in its chunks, without a HEAD.
func TestOpenReadsInOneGet(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		payloads, _ := randomPayloads(3, 20, 200)
		small, data := buildSegment(t, time.Now(), segment.CodecZstd, payloads...)
		e.put(t, small, data)
		var c s3test.Counter
		r := countingReader(e, &c, 64<<10)
		records := func(name string) int {
			t.Helper()
			f, err := r.Open(ctx, sink.AreaReady, name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				_, err := sr.Next()
				if errors.Is(err, io.EOF) {
					return n
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
		if n := records(small); n != 20 {
			t.Fatalf("read %d records, want 20", n)
		}
		if got := c.Counts(); got.Total() != 1 || got["GetObject"] != 1 {
			t.Fatalf("opening and reading a %d-byte segment took %v, want one GetObject", len(data), got)
		}

		payloads, _ = randomPayloads(4, 220, 10<<10) // ~2 MiB, incompressible
		large, data := buildSegment(t, time.Now(), segment.CodecNone, payloads...)
		e.put(t, large, data)
		c.Reset()
		r = countingReader(e, &c, int(s3.DefaultReadChunk))
		if n := records(large); n != 220 {
			t.Fatalf("read %d records, want 220", n)
		}
		chunks := (len(data) + int(s3.DefaultReadChunk) - 1) / int(s3.DefaultReadChunk)
		// The footer's chunk, read first, may be dropped from the cache
		// before the blocks reach it and read again.
		if got := c.Counts(); got["HeadObject"] != 0 || got["GetObject"] > int64(chunks)+1 {
			t.Fatalf("reading a %d-byte segment (%d chunks) took %v, want at most one GetObject per chunk (and the footer's again) and no HeadObject", len(data), chunks, got)
		}
	})
}

// Exists is one HEAD; Discard removes segments there or not, several in one
// request.
func TestExistsAndDiscard(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		var names []string
		for i := range 3 {
			name, data := buildSegment(t, time.Now().Add(time.Duration(i)*time.Millisecond), segment.CodecZstd, []byte("x"))
			e.put(t, name, data)
			names = append(names, name)
		}
		var c s3test.Counter
		r := countingReader(e, &c, 0)
		for _, name := range names {
			if ok, err := r.Exists(ctx, sink.AreaReady, name); err != nil || !ok {
				t.Fatalf("Exists(%s) = %v, %v", name, ok, err)
			}
		}
		missing := "20200101T000000.000000000Z-0000000000000000.dlq"
		if ok, err := r.Exists(ctx, sink.AreaReady, missing); err != nil || ok {
			t.Fatalf("Exists(missing) = %v, %v", ok, err)
		}
		if got := c.Counts(); got.Total() != 4 || got["HeadObject"] != 4 {
			t.Fatalf("4 Exists made %v, want 4 HeadObject", got)
		}
		c.Reset()
		if err := r.Discard(ctx, sink.AreaReady, names[0]); err != nil {
			t.Fatal(err)
		}
		if err := r.Discard(ctx, sink.AreaReady, names[1], names[2], missing); err != nil {
			t.Fatal(err)
		}
		if got := c.Counts(); got.Total() != 2 || got["DeleteObject"] != 1 || got["DeleteObjects"] != 1 {
			t.Fatalf("Discard of 1, then 3 segments made %v, want one DeleteObject and one DeleteObjects", got)
		}
		for _, name := range names {
			if ok, err := r.Exists(ctx, sink.AreaReady, name); err != nil || ok {
				t.Fatalf("after Discard, Exists(%s) = %v, %v", name, ok, err)
			}
		}
		if err := r.Discard(ctx, sink.AreaReady, missing); err != nil {
			t.Fatalf("Discard of a missing segment: %v", err)
		}
	})
}

// NamesAfter lists from a name on, in one request for a page.
func TestNamesAfter(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		var names []string
		for i := range 5 {
			name, data := buildSegment(t, time.Now().Add(time.Duration(i)*time.Millisecond), segment.CodecZstd, []byte("x"))
			e.put(t, name, data)
			names = append(names, name)
		}
		var c s3test.Counter
		r := countingReader(e, &c, 0)
		var got []string
		for name, err := range r.NamesAfter(ctx, sink.AreaReady, names[1]) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, name)
		}
		if fmt.Sprint(got) != fmt.Sprint(names[2:]) {
			t.Fatalf("NamesAfter(%s) = %v, want %v", names[1], got, names[2:])
		}
		if n := c.Counts()["ListObjects"]; n != 1 {
			t.Fatalf("NamesAfter made %d ListObjects, want 1", n)
		}
	})
}

// An Open that fails (here: its context is cancelled) returns a nil
// sink.File, not a nil *object in a non-nil interface, which a caller's
// `if f != nil { f.Close() }` would have panicked on (a restore under load).
func TestOpenFailureReturnsNoFile(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		payloads, _ := randomPayloads(3, 20, 200)
		name, data := buildSegment(t, time.Now(), segment.CodecZstd, payloads...)
		e.put(t, name, data)
		var c s3test.Counter
		r := countingReader(e, &c, 64<<10)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		f, err := r.Open(ctx, sink.AreaReady, name)
		if err == nil {
			t.Fatal("Open with a cancelled context succeeded")
		}
		if f != nil {
			t.Fatalf("Open failed (%v) and returned a non-nil file %#v", err, f)
		}
	})
}

// A table's DropRecord removes a record whatever its version in one request,
// and a record not there is not an error.
func TestTableDropRecordInOneRequest(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		var c s3test.Counter
		r := countingReader(e, &c, 64<<10)
		tb, err := r.Table("marks")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.WriteRecord(ctx, "d-1", []byte(`{}`), ""); err != nil {
			t.Fatal(err)
		}
		c.Reset()
		for range 2 { // there, then not
			if err := sink.DropRecord(ctx, tb, "d-1"); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.Counts(); got.Total() != 2 || got["DeleteObject"] != 2 {
			t.Fatalf("two drops: %v; want one DeleteObject each", got)
		}
		if _, _, err := tb.ReadRecord(ctx, "d-1"); !errors.Is(err, sink.ErrNotFound) {
			t.Fatalf("read after the drop: %v, want ErrNotFound", err)
		}
	})
}

// A listing of records asks for a small page first and larger ones after:
// a caller that stops after a key (a poll of the due jobs) reads 32 keys,
// where a server's cost grows with the keys a page returns; a whole listing
// still takes few requests.
func TestRecordNamesPagesGrow(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		var c s3test.Counter
		tb := markers(t, ctx, countingReader(e, &c, 0), 100)
		c.Reset()
		for range tb.RecordNames(ctx) {
			break
		}
		if n := c.Counts()["ListObjects"]; n != 1 {
			t.Fatalf("a listing stopped after its first key made %d ListObjects, want 1", n)
		}
		c.Reset()
		n := 0
		for _, err := range tb.RecordNames(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if got := c.Counts()["ListObjects"]; n != 100 || got != 3 { // 32, 64, 128 keys asked for
			t.Fatalf("a whole listing: %d names in %d ListObjects; want 100 in 3", n, got)
		}
	})
}

// A table listed again and again by a caller that stops after about as many
// keys each time (a runner's poll of its due jobs) asks for them in one
// request: where pages growing from 32 keys took three requests for 100
// keys (32, 64, then 128), and a server such as versitygw reads the whole
// directory for each, the first page asks for a few more than the last
// listing read. A listing read whole starts small again.
func TestRecordNamesAskForWhatTheLastListingRead(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		var c s3test.Counter
		tb := markers(t, ctx, countingReader(e, &c, 0), 300)
		read := func(n int) int64 { // n keys, or all for 0

			c.Reset()
			i := 0
			for _, err := range tb.RecordNames(ctx) {
				if err != nil {
					t.Fatal(err)
				}
				if i++; i == n {
					break
				}
			}
			return c.Counts()["ListObjects"]
		}
		if got := read(100); got != 3 {
			t.Fatalf("a first listing of 100 keys made %d ListObjects, want 3 (32, 64, 128 keys)", got)
		}
		for _, n := range []int{100, 110, 90} {
			if got := read(n); got != 1 {
				t.Fatalf("a listing of %d keys after one of about as many made %d ListObjects, want 1", n, got)
			}
		}
		if got := read(0); got < 2 { // whole: grows past the last one's 90
			t.Fatalf("a whole listing of 300 keys made %d ListObjects", got)
		}
		if got := read(100); got != 3 {
			t.Fatalf("a listing of 100 keys after a whole listing made %d ListObjects, want 3, from 32 keys again", got)
		}
	})
}

// markers returns table "marks" of r holding n empty records, d-000 on.
func markers(t *testing.T, ctx context.Context, r *s3.Reader, n int) sink.Records {
	t.Helper()
	tb, err := r.Table("marks")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := tb.WriteRecord(ctx, fmt.Sprintf("d-%03d", i), []byte(`{}`), ""); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func crc32c(b []byte) string {
	return fmt.Sprintf("%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func closeWriter(t *testing.T, w *s3.Writer) {
	t.Helper()
	if err := w.Close(testCtx(t, time.Minute)); err != nil {
		t.Fatalf("Writer.Close: %v", err)
	}
}

// A committed segment is uploaded whole, with its checksum in the metadata;
// Truncate and Abort work; Close waits, a second Close is harmless (it
// returns the first one's result) and a closed Writer refuses work.
func TestWriterUploads(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		w := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte("one"), []byte("two"))
		sw, err := w.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		half := len(data) / 2
		mustWrite(t, sw, data[:half])
		mustWrite(t, sw, []byte("a write that failed half way"))
		if err := sw.Truncate(int64(half)); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, sw, data[half:])
		if err := sw.Sync(); !errors.Is(err, dlqdump.ErrConfig) {
			t.Fatalf("Sync without SpoolDir = %v, want an error wrapping ErrConfig", err)
		}

		aborted, _ := buildSegment(t, time.Now(), segment.CodecZstd, []byte("gone"))
		asw, err := w.Create(ctx, aborted)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, asw, []byte("never published"))
		if err := asw.Abort(); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatalf("second Commit: %v", err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.keys(t); len(got) != 1 || got[0] != name {
			t.Fatalf("keys = %q, want just %s", got, name)
		}
		got, err := e.get(t, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("object = %d bytes, %v; want the %d bytes written", len(got), err, len(data))
		}
		key := e.prefix + name
		h, err := e.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &e.bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		if h.Metadata[s3.MetaChecksum] != crc32c(data) {
			t.Fatalf("metadata %v, want %s=%s", h.Metadata, s3.MetaChecksum, crc32c(data))
		}
		if st := w.Stats(); st.Uploaded != 1 || st.Backlog != 0 || st.Spooled != 0 || w.Backlog() != 0 {
			t.Fatalf("Stats = %+v, Backlog %d; want 1 uploaded, nothing spooled", st, w.Backlog())
		}
		closeWriter(t, w)
		if err := w.Close(ctx); err != nil {
			t.Fatalf("second Close = %v, want the first one's result, nil", err)
		}
		if _, err := w.Create(ctx, name); !errors.Is(err, dlqdump.ErrClosed) {
			t.Fatalf("Create after Close = %v, want ErrClosed", err)
		}
	})
}

func mustWrite(t *testing.T, w io.Writer, p []byte) {
	t.Helper()
	if n, err := w.Write(p); n != len(p) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

func TestWriterConfig(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	nowhere := (&s3test.Server{Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b"}).Client()
	for _, w := range []*s3.Writer{{Bucket: "b"}, {Client: nowhere}} {
		if _, err := w.Create(ctx, "x.dlq"); !errors.Is(err, dlqdump.ErrConfig) {
			t.Fatalf("Create with %+v = %v, want ErrConfig", w, err)
		}
	}
	w := &s3.Writer{Client: nowhere, Bucket: "b"}
	for _, bad := range []string{"", "a/b.dlq", ".hidden.dlq", "x.txt", `a\b.dlq`} {
		if _, err := w.Create(ctx, bad); !errors.Is(err, s3.ErrName) {
			t.Fatalf("Create(%q) = %v, want ErrName", bad, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// An upload that finds its own earlier attempt's object (same bytes) succeeds
// without a second copy; one that finds another object under its name never
// overwrites it and goes up under a new name.
func TestWriterNeverOverwrites(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		created := time.Now()
		same, data := buildSegment(t, created, segment.CodecZstd, []byte("payload"))
		key := e.prefix + same
		if _, err := e.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &e.bucket, Key: &key, Body: bytes.NewReader(data),
			Metadata: map[string]string{s3.MetaChecksum: crc32c(data)}}); err != nil {
			t.Fatal(err)
		}
		taken, data2 := buildSegment(t, created.Add(time.Millisecond), segment.CodecZstd, []byte("mine"))
		other := []byte("somebody else's object")
		e.put(t, taken, other)

		w := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		for _, s := range []struct {
			name string
			data []byte
		}{{same, data}, {taken, data2}} {
			sw, err := w.Create(ctx, s.name)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, sw, s.data)
			if err := sw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		closeWriter(t, w)
		keys := e.keys(t)
		if len(keys) != 3 {
			t.Fatalf("keys = %q, want 3: the existing two and the renamed segment", keys)
		}
		if got, _ := e.get(t, same); !bytes.Equal(got, data) {
			t.Fatal("the segment already uploaded changed")
		}
		if got, _ := e.get(t, taken); !bytes.Equal(got, other) {
			t.Fatalf("the other object was overwritten: %q", got)
		}
		var renamed string
		for _, k := range keys {
			if k != same && k != taken {
				renamed = k
			}
		}
		if ct, ok := segment.ParseFileName(renamed); !ok || !ct.Equal(created.Add(time.Millisecond).UTC().Truncate(time.Nanosecond)) {
			t.Fatalf("renamed segment %q does not keep the segment's time", renamed)
		}
		if got, _ := e.get(t, renamed); !bytes.Equal(got, data2) {
			t.Fatal("the renamed segment does not hold its bytes")
		}
	})
}

// Segments above MultipartThreshold go up in parallel parts and read back
// whole, through the read-ahead path and through large direct reads.
func TestWriterMultipart(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		p := newProxy(t, e.srv.Endpoint)
		client := e.clientFor(p.URL())
		ctx := testCtx(t, 2*time.Minute)
		rng := rand.New(rand.NewPCG(7, 8))
		var payloads [][]byte
		var want []string
		for i := range 400 {
			b := make([]byte, 30<<10)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			copy(b, fmt.Sprintf("record %d ", i))
			payloads = append(payloads, b)
			want = append(want, string(b))
		}
		name, data := buildSegment(t, time.Now(), segment.CodecNone, payloads...)
		if len(data) < 11<<20 {
			t.Fatalf("segment is %d bytes; the test wants more than two parts", len(data))
		}
		w := &s3.Writer{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry,
			MultipartThreshold: 5 * dlqdump.Megabyte, PartSize: 5 * dlqdump.Megabyte, PartConcurrency: 3}
		sw, err := w.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 100 << 10 {
			mustWrite(t, sw, data[off:min(off+100<<10, len(data))])
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		if n := p.requestCount("PUT"); n < 3 {
			t.Fatalf("%d PUT requests, want at least 3 parts", n)
		}
		if n := p.requestCount("POST"); n < 2 {
			t.Fatalf("%d POST requests, want a multipart create and complete", n)
		}
		got, err := e.get(t, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("object = %d bytes, %v; want the %d bytes written", len(got), err, len(data))
		}
		r := &s3.Reader{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		readArea(t, r, sink.AreaReady).wantExactlyOnce(t, want)
		f, err := r.Open(ctx, sink.AreaReady, name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, len(data)+100)
		if n, err := f.ReadAt(buf, 0); n != len(data) || !errors.Is(err, io.EOF) || !bytes.Equal(buf[:n], data) {
			t.Fatalf("ReadAt(all) = %d, %v", n, err)
		}
		if n, err := f.ReadAt(buf[:3<<20], 5<<20+17); n != 3<<20 || err != nil || !bytes.Equal(buf[:n], data[5<<20+17:8<<20+17]) {
			t.Fatalf("ReadAt(3 MiB) = %d, %v", n, err)
		}
	})
}

// While S3 is down, committed segments wait in the spool (Backlog), and a
// full spool makes Commit fail with ErrSpoolFull after SpoolWait; nothing is
// lost, and the spool drains when S3 is back.
func TestWriterSpoolFull(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		p := newProxy(t, e.srv.Endpoint)
		ctx := testCtx(t, time.Minute)
		w := &s3.Writer{Client: e.clientFor(p.URL()), Bucket: e.bucket, Prefix: e.prefix,
			Retry:      s3.Retry{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, AttemptTimeout: time.Second},
			SpoolLimit: 4 * dlqdump.Kilobyte, SpoolWait: 100 * time.Millisecond}
		p.stop()
		var want []string
		commit := func(i int) (sink.SegmentWriter, error) {
			payload := fmt.Sprintf("record %d %s", i, strings.Repeat("x", 3000))
			want = append(want, payload)
			name, data := buildSegment(t, time.Now(), segment.CodecNone, []byte(payload))
			sw, err := w.Create(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, sw, data)
			return sw, sw.Commit(ctx)
		}
		if _, err := commit(0); err != nil {
			t.Fatalf("Commit into an empty spool: %v", err)
		}
		start := time.Now()
		sw, err := commit(1)
		if !errors.Is(err, s3.ErrSpoolFull) {
			t.Fatalf("Commit into a full spool = %v, want ErrSpoolFull", err)
		}
		if waited := time.Since(start); waited < 90*time.Millisecond || waited > 5*time.Second {
			t.Fatalf("Commit waited %s, want about SpoolWait (100ms)", waited)
		}
		if b := w.Backlog(); b < 3000 || b > 4096 {
			t.Fatalf("Backlog = %d, want the first segment's size", b)
		}
		deadline := time.Now().Add(10 * time.Second)
		for w.Stats().LastError == nil {
			if time.Now().After(deadline) {
				t.Fatal("no upload error reported while S3 is down")
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("upload error while down: %v", w.Stats().LastError)
		p.start()
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatalf("Commit retried after S3 came back: %v", err)
		}
		closeWriter(t, w)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix}
		readArea(t, r, sink.AreaReady).wantExactlyOnce(t, want)
	})
}

// With SpoolDir, segments committed while S3 is down, and one left open by a
// crash, survive the process: the next Writer's Recover uploads them.
func TestWriterSpoolDirSurvivesRestart(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		p := newProxy(t, e.srv.Endpoint)
		ctx := testCtx(t, time.Minute)
		dir := t.TempDir()
		retry := s3.Retry{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, AttemptTimeout: time.Second}
		w1 := &s3.Writer{Client: e.clientFor(p.URL()), Bucket: e.bucket, Prefix: e.prefix, SpoolDir: dir, Retry: retry}
		p.stop()
		var want []string
		for i := range 3 {
			payload := fmt.Sprintf("committed %d", i)
			want = append(want, payload)
			name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte(payload))
			sw, err := w1.Create(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, sw, data)
			if err := sw.Sync(); err != nil {
				t.Fatalf("Sync with SpoolDir: %v", err)
			}
			if err := sw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// A segment the crash left open: header and one synced block, no footer.
		created := time.Now()
		openName := segment.FileName(created, segment.NewID(created))
		sw, err := w1.Create(ctx, openName)
		if err != nil {
			t.Fatal(err)
		}
		sgw, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			want = append(want, fmt.Sprintf("open %d", i))
			if err := sgw.Add(created, nil, []byte(want[len(want)-1])); err != nil {
				t.Fatal(err)
			}
		}
		if err := sgw.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := sw.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := sw.(io.Closer).Close(); err != nil {
			t.Fatal(err)
		}
		if w1.Backlog() == 0 {
			t.Fatal("Backlog is 0 with three segments spooled")
		}
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err = w1.Close(cctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "3 segments") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("Close while S3 is down = %v, want 3 segments left in %s", err, dir)
		}
		spooled, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
		if len(spooled) != 3 {
			t.Fatalf("spool directory holds %q, want 3 segments", spooled)
		}
		if len(e.keys(t)) != 0 {
			t.Fatal("objects uploaded while S3 was down")
		}

		p.start()
		w2 := &s3.Writer{Client: e.clientFor(p.URL()), Bucket: e.bucket, Prefix: e.prefix, SpoolDir: dir, Retry: retry}
		names, err := w2.Recover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 1 || names[0] != openName {
			t.Fatalf("Recover = %q, want the open segment %s", names, openName)
		}
		if err := w2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w2)
		left, _ := os.ReadDir(dir)
		for _, d := range left {
			if !d.IsDir() {
				t.Fatalf("spool directory still holds %s after the upload", d.Name())
			}
		}
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix}
		readArea(t, r, sink.AreaReady).wantExactlyOnce(t, want)
	})
}

// A Durable Queue works with SpoolDir: every Enqueue returns once the record
// is synced to the spool directory, and everything reaches S3.
func TestQueueDurableSpoolDir(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		w := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, SpoolDir: t.TempDir(), Retry: fastRetry}
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 16 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte, Durable: true, EnqueueTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 300 {
			want = append(want, fmt.Sprintf("durable record %d", i))
			if err := q.Enqueue(want[i]); err != nil {
				t.Fatalf("Enqueue %d: %v", i, err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		readArea(t, &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix}, sink.AreaReady).wantExactlyOnce(t, want)
	})
}

package s3_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func randomPayloads(seed uint64, n, size int) ([][]byte, []string) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var ps [][]byte
	var want []string
	for i := range n {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		copy(b, fmt.Sprintf("record %d ", i))
		ps = append(ps, b)
		want = append(want, string(b))
	}
	return ps, want
}

// Reading a segment block by block is not bound by S3's latency: the next
// chunks are fetched while the current one is used (GETs overlap), and
// nothing is fetched twice or far ahead. The time taken is logged, not
// asserted: on a loaded machine it says little.
func TestReaderReadAhead(t *testing.T) {
	forEachServerSerial(t, func(t *testing.T, e *env) {
		payloads, want := randomPayloads(11, 500, 8<<10)
		name, data := buildSegment(t, time.Now(), segment.CodecNone, payloads...)
		e.put(t, name, data)
		p := newProxy(t, e.srv.Endpoint)
		const latency = 80 * time.Millisecond
		p.setLatency(latency)
		const chunk = 256 << 10
		r := &s3.Reader{Client: e.clientFor(p.URL()), Bucket: e.bucket, Prefix: e.prefix, ReadChunk: chunk, ReadAhead: 3, Retry: fastRetry}
		ctx := testCtx(t, time.Minute)
		f, err := r.Open(ctx, sink.AreaReady, name)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			rec, err := sr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(rec.Payload))
		}
		elapsed := time.Since(start)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read %d records back, want the %d written", len(got), len(want))
		}
		chunks := (len(data) + chunk - 1) / chunk
		serial := time.Duration(chunks) * latency
		gets, fetched := p.requestCount("GET"), p.bytesOut.Load()
		t.Logf("%d bytes in %d chunks: %d GETs, %d bytes fetched, at most %d GETs at once, %s (one chunk at a time would take %s)",
			len(data), chunks, gets, fetched, p.maxGets.Load(), elapsed.Round(time.Millisecond), serial)
		if p.maxGets.Load() < 2 {
			t.Fatal("no GETs overlapped: nothing was fetched ahead")
		}
		if gets > chunks+3 || fetched > int64(len(data))+3*chunk {
			t.Fatalf("%d GETs of %d bytes for %d chunks of a %d-byte segment: too much fetched twice or ahead", gets, fetched, chunks, len(data))
		}
	})
}

// Reads go on through failing requests, timeouts and cut connections.
func TestReaderFaults(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		var want []string
		for s := range 5 {
			payloads, w := randomPayloads(uint64(20+s), 100, 4<<10)
			name, data := buildSegment(t, time.Now().Add(time.Duration(s)*time.Millisecond), segment.CodecNone, payloads...)
			e.put(t, name, data)
			want = append(want, w...)
		}
		p := newProxy(t, e.srv.Endpoint)
		p.setFaults(0.25, 600*time.Millisecond)
		client := e.clientFor(p.URL(), func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		// Chunks of 8 KiB make the segment reader's 256 KiB reads go
		// straight into its buffer; of 64 KiB, through the chunk cache.
		for _, chunk := range []dlqdump.MemorySize{8 << 10, 64 << 10} {
			r := &s3.Reader{Client: client, Bucket: e.bucket, Prefix: e.prefix, ReadChunk: chunk,
				Retry: s3.Retry{MaxAttempts: 30, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond, AttemptTimeout: 400 * time.Millisecond}}
			readArea(t, r, sink.AreaReady).wantExactlyOnce(t, want)
		}
		injected := p.injectedCount()
		total := 0
		for _, n := range injected {
			total += n
		}
		t.Logf("faults injected: %v", injected)
		if total < 3 {
			t.Fatalf("faults injected: %v; the test wants more", injected)
		}
	})
}

// ReadAt follows io.ReaderAt at the edges and refuses reads after Close;
// Open of a missing segment wraps ErrNotFound.
func TestReaderReadAt(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		payloads, _ := randomPayloads(5, 40, 10<<10)
		name, data := buildSegment(t, time.Now(), segment.CodecNone, payloads...)
		e.put(t, name, data)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, ReadChunk: 16 << 10, Retry: fastRetry}
		f, err := r.Open(ctx, sink.AreaReady, name)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(9, 9))
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 64 {
			off := rng.Int64N(int64(len(data)))
			n := rng.IntN(200 << 10)
			wg.Go(func() {
				b := make([]byte, n)
				k, err := f.ReadAt(b, off)
				end := min(off+int64(n), int64(len(data)))
				switch {
				case k != int(end-off):
					errs <- fmt.Errorf("ReadAt(%d, %d) = %d bytes", n, off, k)
				case k < n && !errors.Is(err, io.EOF), k == n && err != nil:
					errs <- fmt.Errorf("ReadAt(%d, %d) = %d, %v", n, off, k, err)
				case !bytes.Equal(b[:k], data[off:end]):
					errs <- fmt.Errorf("ReadAt(%d, %d) returned other bytes", n, off)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if _, err := f.ReadAt(make([]byte, 1), -1); err == nil {
			t.Fatal("ReadAt at a negative offset succeeded")
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := f.ReadAt(make([]byte, 10), 0); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("ReadAt after Close = %v, want os.ErrClosed", err)
		}
		if _, err := r.Open(ctx, sink.AreaReady, "20260101T000000.000000000Z-0000000000000000.dlq"); !errors.Is(err, sink.ErrNotFound) {
			t.Fatalf("Open of a missing segment = %v, want ErrNotFound", err)
		}
		var oe *s3.OpError
		if _, err := r.Open(ctx, sink.AreaQuarantine, name); !errors.As(err, &oe) || oe.Op != "GetObject" || oe.Bucket != e.bucket || !strings.HasSuffix(oe.Key, "quarantine/"+name) {
			t.Fatalf("Open of a missing segment = %v, want an *OpError naming GetObject, the bucket and the key", err)
		}
	})
}

// List pages through an area in name order and lists only its segments:
// not other areas, records, or keys that are not segments.
func TestReaderListPages(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		base := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		var ready, quar []string
		for i := range 50 {
			ct := base.Add(time.Duration(i) * time.Second)
			ready = append(ready, segment.FileName(ct, segment.NewID(ct)))
		}
		for i := range 5 {
			ct := base.Add(time.Duration(i) * time.Hour)
			quar = append(quar, segment.FileName(ct, segment.NewID(ct)))
		}
		rng := rand.New(rand.NewPCG(1, 1))
		for _, i := range rng.Perm(len(ready)) {
			e.put(t, ready[i], []byte(ready[i]))
		}
		for _, n := range quar {
			e.put(t, s3.QuarantinePrefix+n, []byte(n))
			e.put(t, s3.ArchivePrefix+n, []byte(n))
		}
		for _, k := range []string{"README.txt", ".hidden.dlq", "sub/x.dlq", s3.ClaimsPrefix + ready[3] + s3.ClaimSuffix, "quarantine/notes.txt"} {
			e.put(t, k, []byte("{}"))
		}
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, ListPageSize: 7, Retry: fastRetry}
		list := func(area sink.Area) []string {
			var names []string
			for si, err := range r.List(ctx, area) {
				if err != nil {
					t.Fatalf("List(%s): %v", area, err)
				}
				if si.Area != area {
					t.Fatalf("List(%s) returned %+v", area, si)
				}
				if si.Size != int64(len(si.Name)) {
					t.Fatalf("%s: Size %d, want %d", si.Name, si.Size, len(si.Name))
				}
				names = append(names, si.Name)
			}
			return names
		}
		if got := list(sink.AreaReady); !slices.Equal(got, ready) {
			t.Fatalf("List(ready) = %d names %q..., want the %d ready segments in order", len(got), got[:min(3, len(got))], len(ready))
		}
		if got := list(sink.AreaQuarantine); !slices.Equal(got, quar) {
			t.Fatalf("List(quarantine) = %q, want %q", got, quar)
		}
		if got := list(sink.AreaArchive); !slices.Equal(got, quar) {
			t.Fatalf("List(archive) = %q, want %q", got, quar)
		}
		// The record object is a record, not a segment.
		var records []string
		for n, err := range r.RecordNames(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			records = append(records, n)
		}
		if len(records) != 1 || records[0] != ready[3] {
			t.Fatalf("RecordNames = %q, want %s", records, ready[3])
		}
	})
}

// List of 100,000 ready segments (gofakes3): a hundred ListObjectsV2 pages,
// in order. versitygw's posix backend reads the whole directory for every
// page, so there the test lists 10,000 (ten pages; 100,000 take a minute).
func TestList100k(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	forEachServer(t, func(t *testing.T, e *env) {
		n, pageSize := 100_000, 0
		if e.srv.Fake == nil {
			n = 10_000
		}
		base := time.Date(2026, 5, 6, 0, 0, 0, 0, time.UTC)
		names := make([]string, n)
		for i := range names {
			ct := base.Add(time.Duration(i) * time.Millisecond)
			names[i] = segment.FileName(ct, segment.NewID(ct))
		}
		start := time.Now()
		switch {
		case e.srv.Fake != nil:
			// A bucket of its own: gofakes3 scans a whole bucket to list a
			// prefix, which would slow the other tests down.
			e.bucket = "dlqdump-test-100k"
			if err := e.srv.Fake.CreateBucket(e.bucket); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.srv.Fake.ForceDeleteBucket(e.bucket) })
			for _, nm := range names {
				if _, err := e.srv.Fake.PutObject(e.bucket, e.prefix+nm, map[string]string{}, strings.NewReader("x"), 1, nil); err != nil {
					t.Fatal(err)
				}
			}
		case e.srv.Dir != "":
			// versitygw's posix backend serves the files of its directory.
			dir := filepath.Join(e.srv.Dir, e.bucket, filepath.FromSlash(e.prefix))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, nm := range names {
				if err := os.WriteFile(filepath.Join(dir, nm), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		default:
			// A server started outside the tests: PUT fewer objects and
			// list them in smaller pages.
			n, pageSize = 2_500, 250
			names = names[:n]
			var wg sync.WaitGroup
			next := make(chan string)
			for range 16 {
				wg.Go(func() {
					for nm := range next {
						e.put(t, nm, []byte("x"))
					}
				})
			}
			for _, nm := range names {
				next <- nm
			}
			close(next)
			wg.Wait()
		}
		e.put(t, s3.QuarantinePrefix+names[0], []byte("x"))
		e.put(t, s3.ClaimsPrefix+names[1]+s3.ClaimSuffix, []byte("{}"))
		t.Logf("seeded %d objects in %s", n, time.Since(start).Round(time.Millisecond))

		ctx := testCtx(t, 5*time.Minute)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, ListPageSize: pageSize, Retry: fastRetry}
		start = time.Now()
		i := 0
		for si, err := range r.List(ctx, sink.AreaReady) {
			if err != nil {
				t.Fatal(err)
			}
			if i >= n || si.Name != names[i] || si.Size != 1 {
				t.Fatalf("segment %d = %+v, want %s", i, si, names[min(i, n-1)])
			}
			i++
		}
		if i != n {
			t.Fatalf("listed %d segments, want %d", i, n)
		}
		t.Logf("listed %d segments in %s", n, time.Since(start).Round(time.Millisecond))
	})
}

// Retry is the one retry policy: a call that keeps failing is attempted
// exactly MaxAttempts times, whatever the client's own retryer would do
// (the default SDK retryer makes 3 attempts per call and would turn 3 into 9).
func TestRetryIsTheOnePolicy(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		name, data := buildSegment(t, time.Now(), segment.CodecNone, []byte("x"))
		e.put(t, name, data)
		p := newProxy(t, e.srv.Endpoint)
		p.setFaults(1, 0, fault500)
		const attempts = 3
		r := &s3.Reader{Client: e.clientFor(p.URL(), func(o *awss3.Options) { o.RetryMaxAttempts = 5 }), Bucket: e.bucket, Prefix: e.prefix,
			Retry: s3.Retry{MaxAttempts: attempts, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
		_, err := r.Open(testCtx(t, time.Minute), sink.AreaReady, name)
		if err == nil {
			t.Fatal("Open through a proxy failing every request succeeded")
		}
		if !strings.Contains(err.Error(), "gave up after 3 attempts") {
			t.Errorf("error %q does not say it gave up after %d attempts", err, attempts)
		}
		if got := p.injectedCount()[fault500]; got != attempts {
			t.Fatalf("%d requests reached the proxy for one call with MaxAttempts %d, want exactly %d", got, attempts, attempts)
		}
	})
}

package s3_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// gatedPuts holds the PUTs of segments whose key contains hold until
// released, and counts the PUTs in flight.
type gatedPuts struct {
	inner  awss3.HTTPClient
	hold   string
	gate   chan struct{}
	mu     sync.Mutex
	now    int
	most   int
	inside chan struct{} // one receive per held PUT that arrived
}

func (g *gatedPuts) Do(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPut || strings.Contains(r.URL.Path, ".claims/") {
		return g.inner.Do(r)
	}
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	if g.hold != "" && strings.Contains(r.URL.Path, g.hold) {
		g.inside <- struct{}{}
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return g.inner.Do(r)
}

// Segments are uploaded several at once, at most Uploads; one whose upload
// hangs keeps itself and every segment committed after it in the backlog
// (the held ones are the last committed), though those are stored, and
// Flush waits for it.
func TestWriterUploadsInParallel(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		var names []string
		var datas [][]byte
		base := time.Now()
		for i := range 8 {
			name, data := buildSegment(t, base.Add(time.Duration(i)*time.Millisecond), segment.CodecZstd, []byte("record"))
			names, datas = append(names, name), append(datas, data)
		}
		g := &gatedPuts{hold: names[0], gate: make(chan struct{}), inside: make(chan struct{}, 1)}
		client := e.srv.Client(func(o *awss3.Options) { g.inner = o.HTTPClient; o.HTTPClient = g })
		w := &s3.Writer{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, Uploads: 3}
		for i, name := range names {
			sw, err := w.Create(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, sw, datas[i])
			if err := sw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		<-g.inside // the first segment's upload hangs
		// The others go on, two at a time beside it, and are stored.
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		for _, name := range names[1:] {
			for {
				// Watched before the look: an upload stored between
				// the look and the watch would otherwise be the last
				// change, and nothing would wake the wait.
				bl := w.WatchBacklog()
				ok, err := r.Exists(ctx, sink.AreaReady, name)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					break
				}
				select {
				case <-bl.Changed:
				case <-ctx.Done():
					t.Fatalf("%s was not uploaded beside the hanging one", name)
				}
			}
		}
		bl := w.WatchBacklog()
		if bl.Segments != len(names) || bl.Uncertain != len(names) {
			t.Fatalf("backlog with the oldest upload hanging: %d segments, %d uncertain; want %d and %d (the held ones are the last committed)",
				bl.Segments, bl.Uncertain, len(names), len(names))
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := w.Flush(short)
		cancel()
		if err == nil {
			t.Fatal("Flush returned while the oldest segment was not uploaded")
		}
		close(g.gate)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if bl := w.WatchBacklog(); bl.Segments != 0 || bl.Bytes != 0 {
			t.Fatalf("backlog after Flush: %+v", bl)
		}
		closeWriter(t, w)
		g.mu.Lock()
		most := g.most
		g.mu.Unlock()
		if most < 2 || most > 3 {
			t.Fatalf("at most %d uploads at once, want 2 or 3 (Uploads 3)", most)
		}
		rb := readArea(t, r, sink.AreaReady)
		if len(rb.names) != len(names) {
			t.Fatalf("stored %d segments, want %d", len(rb.names), len(names))
		}
	})
}

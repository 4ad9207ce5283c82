package dlqdump_test

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// callCounter counts the per-segment calls a Restorer makes to its sink.
type callCounter struct {
	*memsink.Store
	reads, opens atomic.Int64
}

func (c *callCounter) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	c.reads.Add(1)
	return c.Store.ReadRecord(ctx, name)
}

func (c *callCounter) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	c.opens.Add(1)
	return c.Store.Open(ctx, area, name)
}

// Every quarantined segment keeps a record (its progress, state
// quarantined), and refresh counts those records among the "orphans" (not
// ready), so every pass Sweeps each of them: a read of the record and a
// lookup in the ready and the quarantine areas, only to keep it. A started
// Restorer makes a pass every CheckInterval (default 1s) while idle, so an
// idle restorer costs three store requests per quarantined segment per
// second (on S3: 30,000 requests/s for 10,000 quarantined segments, plus a
// HeadObject per quarantined segment per refresh for List's reasons),
// growing without bound with the quarantine.
func TestReviewIdlePassCostGrowsWithTheQuarantine(t *testing.T) {
	st := memsink.New()
	base := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	const quarantined = 1000
	for i := range quarantined {
		created := base.Add(time.Duration(i) * time.Second)
		name := segment.FileName(created, segment.NewID(created))
		st.Put(sink.AreaQuarantine, name, []byte("x"))
		rec := (`{"v":2,"owner":"a","rev":3,"state":"quarantined","progress":{"offset":64,"seq":5,"delivered":5,"done":true,"damaged":1}}`)
		if _, err := st.WriteRecord(t.Context(), name, []byte(rec), ""); err != nil {
			t.Fatal(err)
		}
	}
	cc := &callCounter{Store: st}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: cc, Queue: &dest{}, Decoder: decoder.Fallthrough{AsString: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	reads, opens := cc.reads.Load(), cc.opens.Load()
	if reads+opens > 100 {
		t.Fatalf("one idle pass (nothing ready) over %d quarantined segments: %d record reads and %d opens", quarantined, reads, opens)
	}
}

// countingHTTP counts the requests an S3 client sends, by method.
type countingHTTP struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingHTTP) Do(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[req.Method]++
	c.mu.Unlock()
	return http.DefaultClient.Do(req)
}

func (c *countingHTTP) total() (n int, by map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	by = maps.Clone(c.n)
	for _, k := range by {
		n += k
	}
	return n, by
}

// The same on S3: besides the sweep, every refresh (two per pass, and one
// per CheckInterval from the status loop) lists the quarantine through
// s3.Reader.List, which reads each quarantined segment's reason with a
// HeadObject, only for refresh to count them.
func TestReviewIdlePassCostGrowsWithTheQuarantineS3(t *testing.T) {
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	prefix := s3test.UniquePrefix(t.Name())
	setup := &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix}
	base := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	const quarantined = 200
	for i := range quarantined {
		created := base.Add(time.Duration(i) * time.Second)
		name := segment.FileName(created, segment.NewID(created))
		sw, err := setup.Create(t.Context(), sink.AreaQuarantine, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		rec := `{"v":2,"owner":"a","rev":3,"state":"quarantined","progress":{"offset":64,"seq":5,"delivered":5,"done":true,"damaged":1}}`
		if _, err := setup.WriteRecord(t.Context(), name, []byte(rec), ""); err != nil {
			t.Fatal(err)
		}
	}
	hc := &countingHTTP{n: map[string]int{}}
	rd := &s3.Reader{Client: srv.Client(func(o *awss3.Options) { o.HTTPClient = hc }), Bucket: srv.Bucket, Prefix: prefix}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Queue: &dest{}, Decoder: decoder.Fallthrough{AsString: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, by := hc.total(); n > 50 {
		t.Fatalf("one idle pass (nothing ready) over %d quarantined segments: %d S3 requests %v", quarantined, n, by)
	}
}

package s3sim_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/s3sim"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// segments returns n small sealed segments, oldest first.
func segments(t *testing.T, n int) (names []string, datas [][]byte) {
	t.Helper()
	base := time.Now().Add(-time.Hour)
	for i := range n {
		created := base.Add(time.Duration(i) * time.Millisecond)
		id := segment.NewID(created)
		var buf bytes.Buffer
		w, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			if err := w.Add(created, nil, fmt.Appendf(nil, "s%d-r%d", i, j)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		names, datas = append(names, segment.FileName(created, id)), append(datas, buf.Bytes())
	}
	return names, datas
}

type count struct{ n int }

func (c *count) Enqueue(any) error { c.n++; return nil }

func restore(t *testing.T, rd sink.Reader) int {
	t.Helper()
	dst := &count{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{}, Queue: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Run(context.Background(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	return dst.n
}

// A Restorer on the simulated prefix makes the requests it makes on an
// s3.Reader (gofakes3), operation by operation.
func TestCalibration(t *testing.T) {
	names, datas := segments(t, 40)
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	prefix := s3test.UniquePrefix(t.Name())
	seed := &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix}
	sim := s3sim.New(s3sim.Options{})
	ctx := context.Background()
	for i, name := range names {
		sw, err := seed.Create(ctx, sink.AreaReady, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Write(datas[i]); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		sim.Put(name, datas[i])
	}
	var c s3test.Counter
	real := &s3.Reader{Client: srv.Client(func(o *awss3.Options) { o.HTTPClient = c.Wrap(o.HTTPClient) }), Bucket: srv.Bucket, Prefix: prefix}
	if n := restore(t, real); n != 200 {
		t.Fatalf("s3.Reader: restored %d records, want 200", n)
	}
	if n := restore(t, sim); n != 200 {
		t.Fatalf("s3sim: restored %d records, want 200", n)
	}
	want := c.Counts()
	got, slow := sim.Counts()
	if slow != 0 {
		t.Fatalf("%d SlowDowns without limits", slow)
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s: %d requests simulated, %d made by s3.Reader", op, got[op], n)
		}
	}
	for op, n := range got {
		if _, ok := want[op]; !ok {
			t.Errorf("%s: %d requests simulated, none made by s3.Reader", op, n)
		}
	}
	t.Logf("requests for %d segments: %v", len(names), want)
}

// Past the prefix's write rate, requests are slowed down and retried.
func TestSlowDown(t *testing.T) {
	sim := s3sim.New(s3sim.Options{WriteRate: 20})
	ctx := context.Background()
	for i := range 40 {
		if _, err := sim.WriteRecord(ctx, fmt.Sprintf("r%02d.dlq", i), []byte("x"), ""); err != nil {
			t.Fatal(err)
		}
	}
	counts, slow := sim.Counts()
	if slow == 0 || counts["PutObject"] != 40+slow {
		t.Fatalf("40 writes at 20/s: %v, %d slowed down; want some slowed down and retried", counts, slow)
	}
}

package s3test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// A client of the proxy's Server reaches the target, each request at least
// RTT later, and the proxy counts the requests by operation.
func TestProxy(t *testing.T) {
	srv, stop, err := NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const rtt = 30 * time.Millisecond
	p, err := NewProxy(srv, rtt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ps := p.Server()
	if ps.Endpoint == srv.Endpoint || ps.Bucket != srv.Bucket || !strings.HasPrefix(ps.Name, "gofakes3 +30ms") {
		t.Fatalf("proxy server %+v", ps)
	}
	ctx := context.Background()
	client := ps.Client()
	key := UniquePrefix(t.Name()) + "k"
	start := time.Now()
	if _, err := client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &ps.Bucket, Key: &key, Body: bytes.NewReader([]byte("body"))}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < rtt {
		t.Errorf("a PUT through the proxy took %s, less than its RTT %s", took, rtt)
	}
	for range 2 {
		out, err := client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &ps.Bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		out.Body.Close()
	}
	if _, err := client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &ps.Bucket, Key: &key}); err != nil {
		t.Fatal(err)
	}
	got := p.Counts()
	if got["PutObject"] != 1 || got["GetObject"] != 2 || got["HeadObject"] != 1 || got.Total() != 4 {
		t.Fatalf("counts %v, want 1 PutObject, 2 GetObject, 1 HeadObject", got)
	}
	if s := got.Per(2); s != "GetObject 1.00, HeadObject 0.50, PutObject 0.50" {
		t.Errorf("Per(2) = %q", s)
	}
	before := p.Counts()
	if _, err := client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &ps.Bucket, Key: &key}); err != nil {
		t.Fatal(err)
	}
	if d := p.Counts().Sub(before); len(d) != 1 || d["DeleteObject"] != 1 {
		t.Fatalf("counts since = %v, want 1 DeleteObject", d)
	}
	p.Reset()
	if n := p.Counts().Total(); n != 0 {
		t.Fatalf("after Reset: %d requests", n)
	}
}

// A Counter counts the requests of the client it wraps.
func TestCounter(t *testing.T) {
	srv, stop, err := NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var c Counter
	client := srv.Client(func(o *awss3.Options) { o.HTTPClient = c.Wrap(o.HTTPClient) })
	key := UniquePrefix(t.Name()) + "k"
	ctx := context.Background()
	if _, err := client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader([]byte("x"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &srv.Bucket, Key: &key}); err != nil {
		t.Fatal(err)
	}
	if got := c.Counts(); got["PutObject"] != 1 || got["HeadObject"] != 1 || got.Total() != 2 {
		t.Fatalf("counts %v", got)
	}
}

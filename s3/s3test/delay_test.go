package s3test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// Every request through a DelayProxy reaches the target at least RTT after
// it was sent, also the later ones on a kept-alive connection, and bodies
// larger than one read of the proxy (a MiB) go through whole, both ways.
func TestDelayProxy(t *testing.T) {
	srv, stop, err := NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const rtt = 30 * time.Millisecond
	p, err := NewDelayProxy(srv, rtt)
	if err != nil {
		t.Fatal(err)
	}
	ps := p.Server()
	if ps.Endpoint == srv.Endpoint || ps.Bucket != srv.Bucket || !strings.HasPrefix(ps.Name, "gofakes3 +30ms tcp") || p.RTT() != rtt {
		t.Fatalf("delay proxy server %+v, RTT %s", ps, p.RTT())
	}
	ctx := context.Background()
	var c Counter
	client := ps.Client(func(o *awss3.Options) { o.HTTPClient = c.Wrap(o.HTTPClient) })
	key := UniquePrefix(t.Name()) + "k"
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	start := time.Now()
	if _, err := client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &ps.Bucket, Key: &key, Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	const gets = 3
	for range gets {
		out, err := client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &ps.Bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("read %d bytes through the proxy, not the %d written", len(got), len(body))
		}
	}
	if took, n := time.Since(start), c.Counts().Total(); n != 1+gets || took < time.Duration(n)*rtt {
		t.Errorf("%d requests one after the other took %s, less than %d × RTT %s", n, took, n, rtt)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &ps.Bucket, Key: &key}); err == nil {
		t.Error("a request through a closed proxy succeeded")
	}
}

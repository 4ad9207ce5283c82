package s3test_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/dlqdump/dlqdump/s3/s3test"
)

// With --keep-alive, one connection carries many requests: a conditional
// PUT refused before the server read its body (412, If-None-Match or
// If-Match) must not leave the body
// on the connection for the next request to be read from. One connection,
// no retries: any broken exchange shows.
func TestVersityKeepAliveRefusedPutsLeaveTheConnectionClean(t *testing.T) {
	srv := s3test.VersityFor(t, nil)
	var dials atomic.Int64
	d := &net.Dialer{Timeout: 10 * time.Second}
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		}}}
	c := srv.Client(func(o *awss3.Options) { o.HTTPClient = hc; o.RetryMaxAttempts = 1 })
	ctx := t.Context()
	body := bytes.Repeat([]byte("x"), 256<<10)
	key := s3test.UniquePrefix(t.Name()) + "obj"
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		in := &awss3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader(body), IfNoneMatch: aws.String("*")}
		if i%2 == 1 {
			in.IfNoneMatch, in.IfMatch = nil, aws.String(`"0123456789abcdef0123456789abcdef"`) // a version since replaced
		}
		_, err := c.PutObject(ctx, in)
		var ae smithy.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("round %d: conditional put of an existing key: %v; want a refusal", i, err)
		}
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &srv.Bucket, Key: &key})
		if err != nil {
			t.Fatalf("round %d: get after a refused put (%s): %v", i, ae.ErrorCode(), err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || len(got) != len(body) {
			t.Fatalf("round %d: get read %d bytes, %v", i, len(got), err)
		}
	}
	t.Logf("%d connections for 41 requests", dials.Load())
}

package s3_test

// The tests run against two servers: an in-process gofakes3 (always) and a
// real versitygw (github.com/versity/versitygw, posix backend), found or
// started by s3test.Versity: from DLQDUMP_S3_ENDPOINT and the other
// DLQDUMP_S3_* variables (e.g. `eval "$(scripts/versitygw.sh start)"`), else
// a versitygw binary on PATH, in GOBIN or in GOPATH/bin started for the
// run, else, under CI, installed first. Otherwise the versitygw subtests are
// skipped with a message saying how to run them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/s3/s3test"
)

// target is a server the tests run against, or why they cannot.
type target struct {
	name string
	srv  *s3test.Server
	err  error // wraps s3test.ErrNoVersity: skip; otherwise fail
}

var (
	fakeServer *s3test.Server
	targets    []target
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		fake, stopFake, err := s3test.NewFake(nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stopFake()
		fakeServer = fake
		vgw, stop, err := s3test.Versity(nil)
		if err == nil {
			defer stop()
		}
		targets = []target{{"gofakes3", fake, nil}, {"versitygw", vgw, err}}
		return m.Run()
	}())
}

// env is one test's view of a server: its own prefix in the bucket.
type env struct {
	srv    *s3test.Server
	client *awss3.Client // straight to the server
	bucket string
	prefix string
}

// forEachServer runs f against gofakes3 and versitygw, in parallel with the
// other parallel tests.
func forEachServer(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	t.Parallel()
	eachServer(t, true, f)
}

// forEachServerSerial runs f against gofakes3, then versitygw, alone: for
// tests that measure time.
func forEachServerSerial(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	eachServer(t, false, f)
}

func eachServer(t *testing.T, parallel bool, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			if errors.Is(tg.err, s3test.ErrNoVersity) {
				t.Skip(tg.err)
			}
			if tg.err != nil {
				t.Fatal(tg.err)
			}
			f(t, &env{
				srv:    tg.srv,
				client: tg.srv.Client(),
				bucket: tg.srv.Bucket,
				prefix: "t/" + s3test.UniquePrefix(t.Name()),
			})
		})
	}
}

// clientFor returns a client for the env's server through another
// endpoint: a proxy in front of it.
func (e *env) clientFor(endpoint string, opts ...func(*awss3.Options)) *awss3.Client {
	return e.srv.Client(append([]func(*awss3.Options){func(o *awss3.Options) { o.BaseEndpoint = aws.String(endpoint) }}, opts...)...)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// keys lists every key under the env's prefix.
func (e *env) keys(t *testing.T) []string {
	t.Helper()
	var keys []string
	p := awss3.NewListObjectsV2Paginator(e.client, &awss3.ListObjectsV2Input{Bucket: &e.bucket, Prefix: &e.prefix})
	for p.HasMorePages() {
		out, err := p.NextPage(testCtx(t, 30*time.Second))
		if err != nil {
			t.Fatalf("list %s: %v", e.prefix, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), e.prefix))
		}
	}
	return keys
}

func (e *env) put(t *testing.T, key string, body []byte) {
	t.Helper()
	k := e.prefix + key
	if _, err := e.client.PutObject(testCtx(t, 30*time.Second), &awss3.PutObjectInput{Bucket: &e.bucket, Key: &k, Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

func (e *env) get(t *testing.T, key string) ([]byte, error) {
	t.Helper()
	k := e.prefix + key
	out, err := e.client.GetObject(testCtx(t, 30*time.Second), &awss3.GetObjectInput{Bucket: &e.bucket, Key: &k})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(out.Body)
	return buf.Bytes(), err
}

func (e *env) exists(t *testing.T, key string) bool {
	t.Helper()
	k := e.prefix + key
	_, err := e.client.HeadObject(testCtx(t, 30*time.Second), &awss3.HeadObjectInput{Bucket: &e.bucket, Key: &k})
	if err == nil {
		return true
	}
	var nf interface{ ErrorCode() string }
	if errors.As(err, &nf) && (nf.ErrorCode() == "NotFound" || nf.ErrorCode() == "NoSuchKey") {
		return false
	}
	t.Fatalf("head %s: %v", k, err)
	return false
}

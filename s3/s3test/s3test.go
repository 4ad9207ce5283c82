// Package s3test provides S3 servers for tests, benchmarks and reliability
// runs, as net/http/httptest provides HTTP servers: an in-process gofakes3
// ([NewFake]) and a real versitygw ([Versity]), found in the environment or
// started here, each with a bucket ready.
//
// A typical TestMain:
//
//	srv, stop, err := s3test.Versity(nil)
//	switch {
//	case errors.Is(err, s3test.ErrNoVersity):
//		// skip the versitygw tests, saying err
//	case err != nil:
//		// fail them
//	default:
//		defer stop()
//	}
//
// The package does not import testing, so that programs can use it too.
package s3test

import (
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// DefaultBucket is the bucket [NewFake] and [Versity] create when
// [Options.Bucket] is empty.
const DefaultBucket = "dlqdump-test"

// Server is an S3-compatible server with a bucket. It can be passed to
// another process as JSON (without Fake).
type Server struct {
	// Name says which server it is: "gofakes3" or "versitygw".
	Name string `json:"name"`
	// Endpoint is the server's base URL, such as http://127.0.0.1:7070.
	Endpoint string `json:"endpoint"`
	// AccessKey and SecretKey are the credentials the server accepts.
	AccessKey string `json:"access"`
	SecretKey string `json:"secret"`
	// Bucket exists on the server.
	Bucket string `json:"bucket"`
	// Dir is the root of versitygw's posix backend when [Versity] started
	// it: an object is the file Dir/BUCKET/KEY. It is empty for a server
	// found in the environment and for gofakes3.
	Dir string `json:"dir,omitempty"`
	// Fake is the in-memory backend of a [NewFake] server, for seeding
	// objects without requests; nil for versitygw.
	Fake *s3mem.Backend `json:"-"`
	// PID is the process ID of the versitygw [Versity] started, zero for
	// another server (to measure what it costs, say).
	PID int `json:"-"`
}

// Client returns a client for the server as a user would build one for an
// S3-compatible endpoint: region us-east-1, path-style addressing, the
// server's static credentials; its connections time out after 10 seconds
// and its requests after a minute, so that a stuck server fails a run
// instead of hanging it. opts apply last: to go through a proxy set
// BaseEndpoint, to bound requests tighter set HTTPClient.
func (s *Server) Client(opts ...func(*awss3.Options)) *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient: awshttp.NewBuildableClient().
			WithDialerOptions(func(d *net.Dialer) { d.Timeout = 10 * time.Second }).
			WithTimeout(time.Minute),
	}, opts...)
}

// Options configure [NewFake] and [Versity]; a nil *Options means the
// defaults.
type Options struct {
	// Bucket is the bucket to create; DefaultBucket when empty. A server
	// found through DLQDUMP_S3_BUCKET keeps its own.
	Bucket string
	// Install makes [Versity] install versitygw when it is missing even
	// outside CI (it takes about 2 minutes).
	Install bool
	// Script is scripts/versitygw.sh, which installs versitygw; when empty
	// it is looked for in the module root (go env GOMOD) and the
	// directories above it.
	Script string
}

func (o *Options) bucket() string {
	if o == nil || o.Bucket == "" {
		return DefaultBucket
	}
	return o.Bucket
}

// NewFake starts an in-process gofakes3 server on a loopback port, with the
// bucket created, and returns it with the function that stops it.
// gofakes3 accepts any credentials and does not check request times.
func NewFake(opts *Options) (srv *Server, stop func(), err error) {
	backend := s3mem.New()
	bucket := opts.bucket()
	if err := backend.CreateBucket(bucket); err != nil {
		return nil, nil, fmt.Errorf("s3test: gofakes3: create bucket %s: %w", bucket, err)
	}
	ts := httptest.NewServer(gofakes3.New(backend, gofakes3.WithTimeSkewLimit(0)).Server())
	srv = &Server{Name: "gofakes3", Endpoint: ts.URL, AccessKey: "fake", SecretKey: "fake", Bucket: bucket, Fake: backend}
	return srv, ts.Close, nil
}

var prefixSeq atomic.Int64

// UniquePrefix returns a key prefix, ending with a slash, that no other
// call in this process returns and that another run is unlikely to: name
// (a test's name, say) with slashes and spaces replaced and cut to 60
// bytes, a time stamp and a sequence number.
func UniquePrefix(name string) string {
	name = strings.NewReplacer("/", "-", " ", "_").Replace(name)
	if len(name) > 60 {
		name = name[:60]
	}
	return fmt.Sprintf("%s-%d-%d/", name, time.Now().UnixNano()%1e6, prefixSeq.Add(1))
}

package s3_test

// The tests run against two servers: an in-process gofakes3 (always) and a
// real versitygw (github.com/versity/versitygw, posix backend).
//
// versitygw is found this way, first match wins:
//  1. DLQDUMP_S3_ENDPOINT (with DLQDUMP_S3_ACCESS_KEY, DLQDUMP_S3_SECRET_KEY,
//     DLQDUMP_S3_BUCKET) points at a running server, e.g. one started by
//     `eval "$(scripts/versitygw.sh start)"`;
//  2. a versitygw binary on PATH, in GOBIN or in GOPATH/bin: TestMain starts
//     it on 127.0.0.1 with a temporary directory and stops it at the end;
//  3. under CI (CI set), TestMain installs it with `scripts/versitygw.sh
//     install` (go install, about 2 minutes) and starts it.
//
// Otherwise the versitygw subtests are skipped with a message saying how to
// run them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

const versityHelp = "versitygw tests need a versitygw server: run `eval \"$(scripts/versitygw.sh start)\"` (installs versitygw v1.8.0 if missing) before `go test ./s3/`, or put versitygw on PATH (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0) so that TestMain starts it"

// server is an S3 server the tests use.
type server struct {
	name     string
	endpoint string
	access   string
	secret   string
	bucket   string
	fake     *s3mem.Backend // gofakes3 only: to seed objects directly
	dir      string         // versitygw started here: its posix root
	skip     string         // why the tests cannot use it
	fail     string         // why it failed to start
}

var (
	fakeServer    *server
	versityServer *server
	prefixSeq     atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		backend := s3mem.New()
		faker := gofakes3.New(backend, gofakes3.WithTimeSkewLimit(0))
		ts := httptest.NewServer(faker.Server())
		defer ts.Close()
		fakeServer = &server{name: "gofakes3", endpoint: ts.URL, access: "fake", secret: "fake", bucket: "dlqdump-test", fake: backend}
		if err := backend.CreateBucket(fakeServer.bucket); err != nil {
			fmt.Fprintln(os.Stderr, "gofakes3:", err)
			return 1
		}
		stop := setupVersity()
		defer stop()
		return m.Run()
	}())
}

// setupVersity finds or starts versitygw and returns how to stop it.
func setupVersity() func() {
	versityServer = &server{name: "versitygw"}
	if ep := os.Getenv("DLQDUMP_S3_ENDPOINT"); ep != "" {
		versityServer.endpoint = ep
		versityServer.access = os.Getenv("DLQDUMP_S3_ACCESS_KEY")
		versityServer.secret = os.Getenv("DLQDUMP_S3_SECRET_KEY")
		versityServer.bucket = os.Getenv("DLQDUMP_S3_BUCKET")
		if versityServer.bucket == "" {
			versityServer.fail = "DLQDUMP_S3_ENDPOINT is set but DLQDUMP_S3_BUCKET is not"
		}
		return func() {}
	}
	bin := findVersity()
	if bin == "" && os.Getenv("CI") != "" {
		script := filepath.Join("..", "scripts", "versitygw.sh")
		cmd := exec.Command("bash", script, "install")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			versityServer.fail = fmt.Sprintf("CI: %s install: %v", script, err)
			return func() {}
		}
		bin = findVersity()
	}
	if bin == "" {
		if os.Getenv("CI") != "" {
			versityServer.fail = "CI: versitygw not found after install; " + versityHelp
		} else {
			versityServer.skip = versityHelp
		}
		return func() {}
	}
	stop, err := startVersity(bin)
	if err != nil {
		versityServer.fail = "start versitygw: " + err.Error()
		return func() {}
	}
	return stop
}

func findVersity() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) > 0 && lines[0] != "" {
			dirs = append(dirs, lines[0])
		}
		if len(lines) > 1 {
			for _, p := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(p, "bin"))
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

func startVersity(bin string) (func(), error) {
	dir, err := os.MkdirTemp("", "dlqdump-versitygw-")
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	access, secret := "dlqdump-test", "dlqdump-test-secret-"+fmt.Sprint(time.Now().UnixNano())
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+access, "ROOT_SECRET_KEY="+secret)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		os.RemoveAll(dir)
	}
	s := &server{name: "versitygw", endpoint: "http://" + addr, access: access, secret: secret, bucket: "dlqdump-test", dir: root}
	client := newClient(s.endpoint, access, secret)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &s.bucket})
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(logf.Name())
			os.RemoveAll(dir)
			return nil, fmt.Errorf("versitygw exited: %v: %s", werr, bytes.TrimSpace(log))
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("not ready after 30s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	*versityServer = *s
	return stop, nil
}

// newClient returns a client for an S3-compatible endpoint, as a user
// would build it.
func newClient(endpoint, access, secret string, opts ...func(*awss3.Options)) *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	}, opts...)
}

// env is one test's view of a server: its own prefix in the bucket.
type env struct {
	srv    *server
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
	for _, srv := range []*server{fakeServer, versityServer} {
		t.Run(srv.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			if srv.fail != "" {
				t.Fatal(srv.fail)
			}
			if srv.skip != "" {
				t.Skip(srv.skip)
			}
			f(t, newEnv(t, srv))
		})
	}
}

func newEnv(t *testing.T, srv *server) *env {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return &env{
		srv:    srv,
		client: newClient(srv.endpoint, srv.access, srv.secret),
		bucket: srv.bucket,
		prefix: fmt.Sprintf("t/%s-%d-%d/", name, time.Now().UnixNano()%1e6, prefixSeq.Add(1)),
	}
}

func (e *env) clientFor(endpoint string, opts ...func(*awss3.Options)) *awss3.Client {
	return newClient(endpoint, e.srv.access, e.srv.secret, opts...)
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

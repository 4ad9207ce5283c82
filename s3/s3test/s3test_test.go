package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestUniquePrefix(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		p := UniquePrefix("TestX/sub test")
		if !strings.HasPrefix(p, "TestX-sub_test-") || !strings.HasSuffix(p, "/") || strings.Count(p, "/") != 1 {
			t.Fatalf("UniquePrefix = %q", p)
		}
		if seen[p] {
			t.Fatalf("UniquePrefix returned %q twice", p)
		}
		seen[p] = true
	}
	if p := UniquePrefix(strings.Repeat("x", 100)); !strings.HasPrefix(p, strings.Repeat("x", 60)+"-") {
		t.Fatalf("long name: %q", p)
	}
}

func TestFake(t *testing.T) {
	srv, stop, err := NewFake(&Options{Bucket: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := srv.Fake.PutObject("b1", "seeded", map[string]string{}, strings.NewReader("x"), 1, nil); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, srv, "seeded", "x")
}

// The Server a parent passes to a child works there, Fake aside.
func TestServerJSON(t *testing.T) {
	srv := &Server{Name: "versitygw", Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "s", Bucket: "b", Dir: "/d"}
	b, err := json.Marshal(srv)
	if err != nil {
		t.Fatal(err)
	}
	var got Server
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got != *srv {
		t.Fatalf("JSON round trip: %+v, want %+v", got, *srv)
	}
}

func TestVersityFromEnv(t *testing.T) {
	t.Setenv("DLQDUMP_S3_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("DLQDUMP_S3_ACCESS_KEY", "a")
	t.Setenv("DLQDUMP_S3_SECRET_KEY", "s")
	t.Setenv("DLQDUMP_S3_BUCKET", "b")
	srv, stop, err := Versity(&Options{Bucket: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	want := Server{Name: "versitygw", Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "s", Bucket: "b"}
	if *srv != want {
		t.Fatalf("Versity = %+v, want %+v", *srv, want)
	}
	t.Setenv("DLQDUMP_S3_BUCKET", "")
	if _, _, err := Versity(nil); err == nil || errors.Is(err, ErrNoVersity) {
		t.Fatalf("Versity without DLQDUMP_S3_BUCKET = %v, want an error that is not ErrNoVersity", err)
	}
}

func TestVersityNone(t *testing.T) {
	t.Setenv("DLQDUMP_S3_ENDPOINT", "")
	t.Setenv("CI", "")
	t.Setenv("PATH", t.TempDir()) // neither versitygw nor go
	if _, _, err := Versity(nil); !errors.Is(err, ErrNoVersity) || !strings.Contains(err.Error(), "scripts/versitygw.sh") {
		t.Fatalf("Versity with nothing to run = %v, want ErrNoVersity saying how to get one", err)
	}
}

// A server that dies while starting is reported with its log.
func TestVersityExits(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell script")
	}
	bin := filepath.Join(t.TempDir(), "versitygw")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho no way to serve >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := startVersity(bin, "b")
	if err == nil || !strings.Contains(err.Error(), "no way to serve") {
		t.Fatalf("startVersity of a failing binary = %v, want its log", err)
	}
}

// A versitygw started here serves the bucket from Dir and is gone after
// stop.
func TestVersityStart(t *testing.T) {
	t.Setenv("DLQDUMP_S3_ENDPOINT", "")
	t.Setenv("CI", "")
	srv, stop, err := Versity(&Options{Bucket: "started"})
	if errors.Is(err, ErrNoVersity) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if srv.Bucket != "started" || srv.Dir == "" || srv.Fake != nil {
		t.Fatalf("Versity = %+v", srv)
	}
	if err := os.WriteFile(filepath.Join(srv.Dir, srv.Bucket, "from-dir"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, srv, "from-dir", "x")
	stop()
	stop() // twice is fine
	if _, err := os.Stat(srv.Dir); !os.IsNotExist(err) {
		t.Errorf("after stop, %s: %v", srv.Dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := srv.Client(func(o *awss3.Options) { o.RetryMaxAttempts = 1 }).ListBuckets(ctx, &awss3.ListBucketsInput{}); err == nil {
		t.Error("the server still answers after stop")
	}
}

// Found by ./scripts/test.sh on a loaded machine with versitygw installed:
// the CreateBucket that waits for a started server timed out after it had
// taken effect, and every retry got BucketAlreadyOwnedByYou, which was taken
// for "not ready" until startTimeout: Versity failed. A bucket that exists
// and is ours is ready.
func TestVersityCreateBucketTwiceIsReady(t *testing.T) {
	t.Setenv("DLQDUMP_S3_ENDPOINT", "")
	t.Setenv("CI", "")
	srv, stop, err := Versity(&Options{Bucket: "twice"})
	if errors.Is(err, ErrNoVersity) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The bucket exists: as after an attempt whose answer was lost.
	if err := createBucket(srv.Client(), srv.Bucket, time.Now().Add(5*time.Second), make(chan error, 1)); err != nil {
		t.Fatalf("createBucket of a bucket this server already has: %v", err)
	}
}

// roundTrip reads the seeded key, then writes and reads one through the
// client.
func roundTrip(t *testing.T, srv *Server, seeded, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := srv.Client()
	get := func(key string) string {
		out, err := client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &srv.Bucket, Key: &key})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := get(seeded); got != want {
		t.Fatalf("%s = %q, want %q", seeded, got, want)
	}
	key := UniquePrefix(t.Name()) + "put"
	if _, err := client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader([]byte("y"))}); err != nil {
		t.Fatal(err)
	}
	if got := get(key); got != "y" {
		t.Fatalf("%s = %q, want y", key, got)
	}
}

// The script is found above the module root.
func TestFindScript(t *testing.T) {
	p, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(filepath.Join("..", "..", "scripts", "versitygw.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if p != want {
		t.Fatalf("findScript = %s, want %s", p, want)
	}
}

// With GOBIN unset, the binary is found in GOPATH/bin.
func TestFindVersityInGOPATH(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(goBin), "versitygw")); err == nil {
		t.Skip("versitygw is next to go")
	}
	gopath := t.TempDir()
	want := filepath.Join(gopath, "bin", "versitygw")
	if err := os.Mkdir(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(goBin))
	t.Setenv("GOENV", "off")
	t.Setenv("GOBIN", "")
	t.Setenv("GOPATH", gopath)
	if got := findVersity(); got != want {
		t.Fatalf("findVersity = %q, want %q", got, want)
	}
}

package main

// The tests build the dlqdump binary once (TestMain) and run it as a user
// would, with os/exec. Dumps are made with the segment package directly,
// with fixed creation times, IDs and record times, so that names and output
// are the same on every run; ls, stat, cat and quarantine ls output is
// compared with the golden files in testdata/ (go test -update rewrites
// them).
//
// S3 locations are tested against two servers: an in-process gofakes3,
// always, and a real versitygw. versitygw is used from DLQDUMP_S3_ENDPOINT
// (with DLQDUMP_S3_ACCESS_KEY, DLQDUMP_S3_SECRET_KEY, DLQDUMP_S3_BUCKET) when
// set, e.g. by `eval "$(scripts/versitygw.sh start)"`; otherwise TestMain
// starts one with scripts/versitygw.sh (installing it if needed) and stops
// it at the end. If that fails, the versitygw tests fail under CI and are
// skipped, with the reason, elsewhere.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	binary string // the built dlqdump

	fakeS3    *s3Server
	versityS3 *s3Server
	prefixSeq atomic.Int64
)

// s3Server is an S3 server the tests run the binary against.
type s3Server struct {
	name     string
	endpoint string
	access   string
	secret   string
	bucket   string
	skip     string // why it cannot be used here
	fail     string // why it failed (CI)
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "dlqdump-cli-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "dlqdump")
		args := []string{"build", "-o", binary}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, ".")
		build := exec.Command("go", args...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "go build:", err)
			return 1
		}

		backend := s3mem.New()
		faker := gofakes3.New(backend, gofakes3.WithTimeSkewLimit(0))
		ts := httptest.NewServer(faker.Server())
		defer ts.Close()
		fakeS3 = &s3Server{name: "gofakes3", endpoint: ts.URL, access: "fake", secret: "fake", bucket: "dlqdump-cli"}
		if err := backend.CreateBucket(fakeS3.bucket); err != nil {
			fmt.Fprintln(os.Stderr, "gofakes3:", err)
			return 1
		}
		stop := setupVersity(dir)
		defer stop()
		return m.Run()
	}())
}

// setupVersity finds or starts versitygw and returns how to stop it.
func setupVersity(tmp string) func() {
	versityS3 = &s3Server{name: "versitygw"}
	if ep := os.Getenv("DLQDUMP_S3_ENDPOINT"); ep != "" {
		versityS3.endpoint = ep
		versityS3.access = os.Getenv("DLQDUMP_S3_ACCESS_KEY")
		versityS3.secret = os.Getenv("DLQDUMP_S3_SECRET_KEY")
		versityS3.bucket = os.Getenv("DLQDUMP_S3_BUCKET")
		if versityS3.bucket == "" {
			versityS3.fail = "DLQDUMP_S3_ENDPOINT is set but DLQDUMP_S3_BUCKET is not"
		}
		return func() {}
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "versitygw.sh"))
	state := filepath.Join(tmp, "versitygw.state")
	env := append(os.Environ(), "DLQDUMP_VGW_STATE="+state, "DLQDUMP_S3_BUCKET=dlqdump-cli")
	cmd := exec.Command("bash", script, "start")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("%s start: %v", script, err)
		if os.Getenv("CI") != "" {
			versityS3.fail = msg
		} else {
			versityS3.skip = msg + `; run eval "$(scripts/versitygw.sh start)" first`
		}
		return func() {}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		switch k {
		case "DLQDUMP_S3_ENDPOINT":
			versityS3.endpoint = v
		case "DLQDUMP_S3_ACCESS_KEY":
			versityS3.access = v
		case "DLQDUMP_S3_SECRET_KEY":
			versityS3.secret = v
		case "DLQDUMP_S3_BUCKET":
			versityS3.bucket = v
		}
	}
	if versityS3.endpoint == "" {
		versityS3.fail = fmt.Sprintf("%s start printed no endpoint: %q", script, out.String())
	}
	return func() {
		stop := exec.Command("bash", script, "stop")
		stop.Env = env
		stop.Stdout, stop.Stderr = os.Stderr, os.Stderr
		_ = stop.Run()
	}
}

// forEachS3 runs f against gofakes3 and versitygw, each test with its own
// prefix.
func forEachS3(t *testing.T, f func(t *testing.T, srv *s3Server, loc string)) {
	t.Helper()
	for _, srv := range []*s3Server{fakeS3, versityS3} {
		t.Run(srv.name, func(t *testing.T) {
			if srv.fail != "" {
				t.Fatal(srv.fail)
			}
			if srv.skip != "" {
				t.Skip(srv.skip)
			}
			name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
			loc := fmt.Sprintf("s3://%s/dlqdump-cli/%s-%d-%d/", srv.bucket, name, time.Now().UnixNano()%1e6, prefixSeq.Add(1))
			f(t, srv, loc)
		})
	}
}

// result is what a run of the binary produced.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("dlqdump %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cli runs the binary with args and checks its exit status.
func cli(t *testing.T, wantCode int, args ...string) result {
	t.Helper()
	return cliEnv(t, nil, wantCode, args...)
}

// cliS3 runs the binary with the AWS environment of srv.
func cliS3(t *testing.T, srv *s3Server, wantCode int, args ...string) result {
	t.Helper()
	return cliEnv(t, srv.env(), wantCode, args...)
}

func (srv *s3Server) env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + srv.access,
		"AWS_SECRET_ACCESS_KEY=" + srv.secret,
		"AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=" + srv.endpoint,
	}
}

// cliEnv runs the binary with extra environment variables; wantCode < 0
// accepts any exit status.
func cliEnv(t *testing.T, env []string, wantCode int, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(baseEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("dlqdump %s: %v", strings.Join(args, " "), err)
	}
	if wantCode >= 0 && r.code != wantCode {
		t.Fatalf("want exit status %d; %s", wantCode, r)
	}
	if raceEnabled && strings.Contains(r.stderr, "WARNING: DATA RACE") {
		t.Fatalf("data race in the binary; %s", r)
	}
	return r
}

// baseEnv is the environment of the binary: the test's, without AWS
// settings, and never reaching for EC2 instance metadata.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE="+os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
		"GORACE=atexit_sleep_ms=0",
	)
}

// golden compares got with testdata/NAME, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

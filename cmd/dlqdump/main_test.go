package main

// The tests build the dlqdump binary once (TestMain) and run it as a user
// would, with os/exec. Dumps are made with the segment package directly,
// with fixed creation times, IDs and record times, so that names and output
// are the same on every run; ls, stat, cat and quarantine ls output is
// compared with the golden files in testdata/ (go test -update rewrites
// them).
//
// S3 locations are tested against two servers: an in-process gofakes3,
// always, and a real versitygw, found or started by s3test.Versity: from
// DLQDUMP_S3_ENDPOINT and the other DLQDUMP_S3_* variables when set (e.g. by
// `eval "$(scripts/versitygw.sh start)"`), else a versitygw binary on PATH,
// in GOBIN or in GOPATH/bin started for the run, else, under CI, installed
// first. Otherwise the versitygw tests are skipped, with the reason.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/s3/s3test"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	binary string // the built dlqdump

	fakeS3    *s3test.Server
	s3Targets []s3Target
)

// s3Target is a server the tests run the binary against, or why they
// cannot.
type s3Target struct {
	name string
	srv  *s3test.Server
	err  error // wraps s3test.ErrNoVersity: skip; otherwise fail
}

func TestMain(m *testing.M) {
	if args := os.Getenv(faultArgsEnv); args != "" {
		// A child of a fault test (fault_test.go): run the command.
		os.Exit(faultChild(args))
	}
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

		opts := &s3test.Options{Bucket: "dlqdump-cli"}
		fake, stopFake, err := s3test.NewFake(opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stopFake()
		fakeS3 = fake
		vgw, stop, err := s3test.Versity(opts)
		if err == nil {
			defer stop()
		}
		s3Targets = []s3Target{{"gofakes3", fake, nil}, {"versitygw", vgw, err}}
		return m.Run()
	}())
}

// forEachS3 runs f against gofakes3 and versitygw, each test with its own
// prefix.
func forEachS3(t *testing.T, f func(t *testing.T, srv *s3test.Server, loc string)) {
	t.Helper()
	for _, tg := range s3Targets {
		t.Run(tg.name, func(t *testing.T) {
			if errors.Is(tg.err, s3test.ErrNoVersity) {
				t.Skip(tg.err)
			}
			if tg.err != nil {
				t.Fatal(tg.err)
			}
			f(t, tg.srv, "s3://"+tg.srv.Bucket+"/dlqdump-cli/"+s3test.UniquePrefix(t.Name()))
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
func cliS3(t *testing.T, srv *s3test.Server, wantCode int, args ...string) result {
	t.Helper()
	return cliEnv(t, []string{
		"AWS_ACCESS_KEY_ID=" + srv.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=" + srv.Endpoint,
	}, wantCode, args...)
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

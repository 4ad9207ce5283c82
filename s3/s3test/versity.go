package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqdump/dlqdump/internal/childproc"
)

// ErrNoVersity is the error [Versity] wraps when there is no versitygw to
// use and it may not install one: outside CI, without [Options.Install].
// Tests skip on it, saying the error, which tells how to get one.
var ErrNoVersity = errors.New("s3test: no versitygw")

// startTimeout bounds how long a started versitygw may take to serve.
const startTimeout = 30 * time.Second

// Versity returns a versitygw server (github.com/versity/versitygw, posix
// backend) and the function that stops it. The first of these wins:
//
//  1. DLQDUMP_S3_ENDPOINT, with DLQDUMP_S3_ACCESS_KEY, DLQDUMP_S3_SECRET_KEY
//     and DLQDUMP_S3_BUCKET, names a running server, such as one started
//     by `eval "$(scripts/versitygw.sh start)"`; stop does nothing;
//  2. a versitygw binary on PATH, in GOBIN or in GOPATH/bin is started on
//     127.0.0.1 with a temporary directory, the bucket is created, and stop
//     stops it and removes the directory. The server dies with this
//     process, even when it is killed (on Linux);
//  3. under CI (CI set), or with [Options.Install], versitygw is installed
//     with `scripts/versitygw.sh install` (go install, about 2 minutes;
//     its output goes to standard error) and started as in 2.
//
// Otherwise the error wraps [ErrNoVersity]. When the started server exits
// or does not serve within 30 seconds, the error includes its log. On error
// stop is nil.
func Versity(opts *Options) (srv *Server, stop func(), err error) {
	if ep := os.Getenv("DLQDUMP_S3_ENDPOINT"); ep != "" {
		srv = &Server{
			Name:      "versitygw",
			Endpoint:  ep,
			AccessKey: os.Getenv("DLQDUMP_S3_ACCESS_KEY"),
			SecretKey: os.Getenv("DLQDUMP_S3_SECRET_KEY"),
			Bucket:    os.Getenv("DLQDUMP_S3_BUCKET"),
		}
		if srv.Bucket == "" {
			return nil, nil, errors.New("s3test: DLQDUMP_S3_ENDPOINT is set but DLQDUMP_S3_BUCKET is not")
		}
		return srv, func() {}, nil
	}
	bin := findVersity()
	ci := os.Getenv("CI") != ""
	if bin == "" && (ci || opts != nil && opts.Install) {
		if err := installVersity(opts); err != nil {
			return nil, nil, err
		}
		if bin = findVersity(); bin == "" {
			return nil, nil, errors.New("s3test: versitygw installed, but it is not on PATH, in GOBIN or GOPATH/bin")
		}
	}
	if bin == "" {
		return nil, nil, fmt.Errorf("%w: DLQDUMP_S3_ENDPOINT is not set and versitygw is not on PATH, in GOBIN or GOPATH/bin (it is installed only under CI): "+
			"start one with `eval \"$(scripts/versitygw.sh start)\"`, or install it with `scripts/versitygw.sh install`", ErrNoVersity)
	}
	srv, stop, err = startVersity(bin, opts.bucket())
	if err != nil {
		return nil, nil, fmt.Errorf("s3test: start %s: %w", bin, err)
	}
	return srv, stop, nil
}

// VersityFor returns a versitygw server for a test or benchmark, stopped
// when tb ends: it skips tb when there is none ([ErrNoVersity]) and fails
// it when one could not be started.
func VersityFor(tb testing.TB, opts *Options) *Server {
	tb.Helper()
	srv, stop, err := Versity(opts)
	if errors.Is(err, ErrNoVersity) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return srv
}

// findVersity returns the path of the versitygw binary, looked for as
// scripts/versitygw.sh does, or "".
func findVersity() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		// One line each; GOBIN's is often empty, so trim only the end.
		lines := strings.Split(strings.TrimRight(string(out), "\r\n"), "\n")
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
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// installVersity runs `scripts/versitygw.sh install`.
func installVersity(opts *Options) error {
	script := ""
	if opts != nil {
		script = opts.Script
	}
	if script == "" {
		var err error
		if script, err = findScript(); err != nil {
			return fmt.Errorf("s3test: install versitygw: %w", err)
		}
	}
	cmd := exec.Command("bash", script, "install")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("s3test: %s install: %w", script, err)
	}
	return nil
}

// findScript looks for scripts/versitygw.sh in the module root and the
// directories above it (the bench module is in a subdirectory), or above
// the working directory outside a module.
func findScript() (string, error) {
	start := ""
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			start = filepath.Dir(gomod)
		}
	}
	if start == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		start = wd
	}
	for dir := start; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "scripts", "versitygw.sh")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("scripts/versitygw.sh not found in %s or above", start)
		}
	}
}

// startVersity starts bin on a free loopback port with a temporary posix
// root and creates the bucket.
func startVersity(bin, bucket string) (*Server, func(), error) {
	dir, err := os.MkdirTemp("", "dlqdump-versitygw-")
	if err != nil {
		return nil, nil, err
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logName := filepath.Join(dir, "versitygw.log")
	logf, err := os.Create(logName)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	srv := &Server{
		Name:      "versitygw",
		Endpoint:  "http://" + addr,
		AccessKey: "dlqdump-test",
		SecretKey: fmt.Sprintf("dlqdump-test-secret-%d", time.Now().UnixNano()),
		Bucket:    bucket,
		Dir:       root,
	}
	// --keep-alive: versitygw closes every connection after its response
	// unless told otherwise, which S3 does not; without it, each request
	// costs a TCP connection on both sides.
	cmd := exec.Command(bin, "--port", addr, "--quiet", "--keep-alive", "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+srv.AccessKey, "ROOT_SECRET_KEY="+srv.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	srv.PID = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			logf.Close()
			os.RemoveAll(dir)
		})
	}
	serverLog := func() []byte {
		b, _ := os.ReadFile(logName)
		return bytes.TrimSpace(b)
	}

	// Create the bucket, waiting for the server to listen.
	if err := createBucket(srv.Client(), srv.Bucket, time.Now().Add(startTimeout), exited); err != nil {
		log := serverLog()
		stop()
		return nil, nil, fmt.Errorf("%w; its log: %s", err, log)
	}
	return srv, stop, nil
}

// createBucket creates bucket on a server just started, retrying until it
// answers or the deadline passes, or the server exits (exited gets its
// exit; what is received is put back for stop). A bucket that already exists
// and is ours (BucketAlreadyOwnedByYou) is created: an earlier attempt went
// through and its answer was lost, say to an attempt timeout on a loaded
// machine, which then failed every retry until the deadline.
func createBucket(client *awss3.Client, bucket string, deadline time.Time, exited chan error) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &bucket})
		cancel()
		var owned *types.BucketAlreadyOwnedByYou
		if err == nil || errors.As(err, &owned) {
			return nil
		}
		select {
		case werr := <-exited:
			exited <- werr // for stop
			return fmt.Errorf("versitygw exited: %v", werr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: create bucket %s: %w", startTimeout, bucket, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
)

// s3Env is an S3-compatible server, as printed by scripts/versitygw.sh.
type s3Env struct {
	Endpoint string `json:"endpoint"`
	Access   string `json:"access"`
	Secret   string `json:"secret"`
	Bucket   string `json:"bucket"`
}

func (e *s3Env) client() *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(e.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(e.Access, e.Secret, ""),
	})
}

func s3EnvFromVars() *s3Env {
	e := &s3Env{
		Endpoint: os.Getenv("DLQDUMP_S3_ENDPOINT"),
		Access:   os.Getenv("DLQDUMP_S3_ACCESS_KEY"),
		Secret:   os.Getenv("DLQDUMP_S3_SECRET_KEY"),
		Bucket:   os.Getenv("DLQDUMP_S3_BUCKET"),
	}
	if e.Endpoint == "" || e.Bucket == "" {
		return nil
	}
	return e
}

// versitygwInstalled reports whether scripts/versitygw.sh would find the
// binary without installing it (PATH, GOBIN, GOPATH/bin).
func versitygwInstalled() bool {
	if _, err := exec.LookPath("versitygw"); err == nil {
		return true
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
		if fi, err := os.Stat(filepath.Join(d, "versitygw")); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// startVersitygw runs `script start` with its own state file (so that a
// server started by someone else is neither reused nor stopped), and returns
// the server and a function stopping it.
func startVersitygw(script string) (*s3Env, func(), error) {
	state := filepath.Join(os.TempDir(), fmt.Sprintf("dlqdump-bench-versitygw-%d.state", os.Getpid()))
	env := append(os.Environ(), "DLQDUMP_VGW_STATE="+state, "DLQDUMP_S3_BUCKET=dlqdump-bench")
	cmd := exec.Command("bash", script, "start")
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	stop := func() {
		c := exec.Command("bash", script, "stop")
		c.Env = env
		c.Stderr = os.Stderr
		_ = c.Run()
	}
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("%s start: %w", script, err)
	}
	e := &s3Env{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		switch k {
		case "DLQDUMP_S3_ENDPOINT":
			e.Endpoint = v
		case "DLQDUMP_S3_ACCESS_KEY":
			e.Access = v
		case "DLQDUMP_S3_SECRET_KEY":
			e.Secret = v
		case "DLQDUMP_S3_BUCKET":
			e.Bucket = v
		}
	}
	if e.Endpoint == "" || e.Bucket == "" {
		stop()
		return nil, nil, fmt.Errorf("%s start printed no DLQDUMP_S3_ENDPOINT/BUCKET: %q", script, out)
	}
	return e, stop, nil
}

// s3Usage returns the bytes and number of the ready segments under s.Prefix.
func s3Usage(s *spec) (int64, int, error) {
	r := &s3.Reader{Client: s.S3.client(), Bucket: s.S3.Bucket, Prefix: s.Prefix}
	var total int64
	var n int
	for si, err := range r.List(context.Background(), dlqdump.AreaReady) {
		if err != nil {
			return 0, 0, err
		}
		total += si.Size
		n++
	}
	return total, n, nil
}

// s3Clean deletes the segments of every area under prefix.
func s3Clean(s *spec, prefix string) error {
	ctx := context.Background()
	r := &s3.Reader{Client: s.S3.client(), Bucket: s.S3.Bucket, Prefix: prefix}
	var errs []error
	for _, area := range []dlqdump.Area{dlqdump.AreaReady, dlqdump.AreaQuarantine, dlqdump.AreaArchive} {
		var names []string
		for si, err := range r.List(ctx, area) {
			if err != nil {
				return err
			}
			names = append(names, si.Name)
		}
		for _, name := range names {
			if err := r.Delete(ctx, area, name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// TestS3 runs the commands on S3 locations, as a user would with the AWS
// environment variables set: copy a dump up, inspect it, restore from it,
// move it back.
func TestS3(t *testing.T) {
	forEachS3(t, func(t *testing.T, srv *s3test.Server, loc string) {
		src := makeSample(t)
		orig := snapshot(t, src)
		r := cliS3(t, srv, 0, "cp", src, loc)
		if !strings.Contains(r.stderr, "copied 5 segments from "+src+" to "+loc) {
			t.Errorf("cp to S3: %s", r)
		}
		// Everything reads the same from S3.
		for _, args := range [][]string{{"ls"}, {"ls", "--json"}, {"stat", "--by", "source"}, {"cat", "--area", "all"}, {"cat", "--since", "2026-03-01T12:01:00Z", "--where", "reason=leak"}} {
			want := cli(t, 0, append([]string{args[0], src}, args[1:]...)...).stdout
			got := cliS3(t, srv, 0, append([]string{args[0], loc}, args[1:]...)...).stdout
			if got != want {
				t.Errorf("dlqdump %s on S3:\n%s\nwant\n%s", strings.Join(args, " "), got, want)
			}
		}
		r = cliS3(t, srv, 0, "verify", loc)
		if !strings.Contains(r.stdout, "verified 5 segments, 24 intact records: no damage") {
			t.Errorf("verify on S3: %s", r)
		}
		// Quarantined segments keep their reason.
		if got, want := cliS3(t, srv, 0, "quarantine", "ls", loc).stdout, cli(t, 0, "quarantine", "ls", src).stdout; got != want {
			t.Errorf("quarantine ls on S3:\n%s\nwant\n%s", got, want)
		}

		// Copy back down: the bytes are the same.
		back := filepath.Join(t.TempDir(), "back")
		cliS3(t, srv, 0, "cp", loc, back)
		sameFiles(t, orig, back)

		// Restore B from S3 into an HTTP endpoint that refuses once.
		tg := newTarget(t, func(_ string, attempt int) int {
			if attempt == 0 {
				return 503
			}
			return 200
		})
		r = cliS3(t, srv, 0, "restore", loc, segB.name(), "--to", tg.URL, "--retry-base", "1ms", "--retry-max", "5ms")
		if len(tg.deliveredNow()) != len(segB.records) {
			t.Errorf("restored %d records from S3, want %d; %s", len(tg.deliveredNow()), len(segB.records), r)
		}
		for p, n := range tg.deliveredNow() {
			if n != 1 {
				t.Errorf("%q delivered %d times", p, n)
			}
		}
		if ls := cliS3(t, srv, 0, "ls", loc, "--area", "ready").stdout; strings.Contains(ls, segB.name()) {
			t.Errorf("restored segment still ready on S3:\n%s", ls)
		}

		// Move the rest down into a directory: S3 is left empty.
		down := filepath.Join(t.TempDir(), "down")
		r = cliS3(t, srv, 0, "mv", loc, down)
		if !strings.Contains(r.stderr, "moved 4 segments") {
			t.Errorf("mv from S3: %s", r)
		}
		for _, ar := range allAreas {
			if ls := cliS3(t, srv, 0, "ls", loc, "--area", ar.String(), "--json").stdout; ls != "" {
				t.Errorf("%s segments left on S3 after mv: %s", ar, ls)
			}
		}
		if n := areaNames(t, down, sink.AreaReady); len(n) != 2 {
			t.Errorf("ready after mv from S3: %v", n)
		}
		cli(t, 0, "verify", down)

		// Release from quarantine on S3.
		cliS3(t, srv, 0, "cp", down, loc, "--area", "quarantine")
		r = cliS3(t, srv, 0, "quarantine", "release", loc, segD.name())
		if !strings.Contains(r.stdout, "released "+segD.name()) {
			t.Errorf("release on S3: %s", r)
		}
		if ls := cliS3(t, srv, 0, "ls", loc, "--area", "ready").stdout; !strings.Contains(ls, segD.name()) {
			t.Errorf("released segment not ready on S3:\n%s", ls)
		}
	})
}

// TestS3Flags checks that the flags override the environment.
func TestS3Flags(t *testing.T) {
	srv := fakeS3
	loc := "s3://" + srv.Bucket + "/flags/"
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey}
	// No endpoint: AWS itself would be asked; the endpoint flag points at
	// the fake, path-style by default.
	r := cliEnv(t, env, 0, "ls", loc, "--s3-endpoint", srv.Endpoint, "--s3-region", "eu-west-1")
	if r.stdout != "" {
		t.Errorf("ls of an empty prefix: %s", r)
	}
	r = cliEnv(t, env, exitUsage, "ls", loc, "--s3-endpoint", "127.0.0.1:9")
	if !strings.Contains(r.stderr, "want a URL") {
		t.Errorf("bad endpoint: %s", r)
	}
	cliEnv(t, nil, exitUsage, "ls", "s3:///prefix")
}

// Issue 20: without credentials, an S3 location on a local server printed
// the SDK's "WARN falling back to IMDSv1" and an error about EC2 instance
// roles. With an endpoint given, the instance metadata service is not asked,
// and the message says which variables to set.
func TestS3WithoutCredentials(t *testing.T) {
	r := cliEnv(t, []string{"AWS_EC2_METADATA_DISABLED=false"}, exitError, "ls", "s3://bucket/prefix/", "--s3-endpoint", "http://127.0.0.1:1")
	if !strings.Contains(r.stderr, "no AWS credentials for the S3 endpoint: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") ||
		strings.Contains(r.stderr, "IMDS") || strings.Contains(r.stderr, "SDK ") {
		t.Errorf("without credentials; %s", r)
	}
}

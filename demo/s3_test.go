package main

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// -s3 s3://bucket/prefix: the burst scenario with the segments in an
// S3-compatible server (an in-process gofakes3).
func TestScenarioS3(t *testing.T) {
	backend := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(backend, gofakes3.WithTimeSkewLimit(0)).Server())
	defer ts.Close()
	if err := backend.CreateBucket("dead-letters"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	var stdout, stderr syncBuffer
	args := []string{
		"-s3", "s3://dead-letters/demo/run1", "-s3-endpoint", ts.URL, "-s3-access-key", "fake", "-s3-secret-key", "fake",
		"-scenario", "burst", "-duration", "1500ms", "-drain-timeout", "30s", "-burst-producers", "8",
		"-capacity", "50", "-workers", "2", "-worker-delay", "1ms", "-producers", "1", "-rate", "200",
		"-deadline", "0", "-flush", "150ms", "-restore-interval", "100ms", "-postpone", "5ms", "-log-every", "0",
	}
	code := run(args, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"segments go to s3://dead-letters/demo/run1/ at " + ts.URL, "OK: lost = 0", "segments are in s3://dead-letters/demo/run1/"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if regexp.MustCompile(`leaked\s+0\s`).MatchString(stdout.String()) {
		t.Error("the burst did not overflow the queue")
	}
}

// A scene's Queue owns its Writer and closes it: with one s3.Writer shared by
// the App's scenes, a scene started after another had stopped failed
// ("s3.Writer: closed"). Each scene gets a Writer of its own.
func TestS3SceneAfterSceneStopped(t *testing.T) {
	backend := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(backend, gofakes3.WithTimeSkewLimit(0)).Server())
	defer ts.Close()
	if err := backend.CreateBucket("dead-letters"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sk, err := newS3Sink(ctx, s3Options{URL: "s3://dead-letters/again", Endpoint: ts.URL, AccessKey: "fake", SecretKey: "fake", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	app, _ := newTestApp(t, nil, func(o *AppOptions) { o.Sink = sk })
	for i := range 2 {
		if _, err := app.StartScene(testConfig()); err != nil {
			t.Fatalf("scene %d: %v", i+1, err)
		}
		if err := app.StopScene(ctx, false); err != nil {
			t.Fatalf("stop scene %d: %v", i+1, err)
		}
	}
}

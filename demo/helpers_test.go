package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testConfig is a small, fast scene: no producers, one worker, nothing
// fails unless the payload says so, short flush and restore intervals.
func testConfig() SceneConfig {
	c := defaultSceneConfig()
	c.Capacity = 4
	c.Workers = 1
	c.WorkerDelay = duration(time.Millisecond)
	c.FailRate = 0
	c.MaxRetries = 1
	c.BackoffBase = duration(time.Millisecond)
	c.BackoffMax = duration(5 * time.Millisecond)
	c.Deadline = 0
	c.Producers = 0
	c.ProducersMax = 4
	c.Rate = 100
	c.Flush = duration(100 * time.Millisecond)
	c.RestoreInterval = duration(50 * time.Millisecond)
	c.Postpone = duration(10 * time.Millisecond)
	c.MaxReplays = 2
	return c
}

// syncBuffer is a bytes.Buffer safe for the App's output goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newTestApp starts an App with an fs sink in a temporary directory and, if
// cfg is not nil, a scene; it is closed when the test ends.
func newTestApp(t *testing.T, cfg *SceneConfig, opts ...func(*AppOptions)) (*App, *syncBuffer) {
	t.Helper()
	sk, err := newFSSink(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	base := testConfig()
	if cfg != nil {
		base = *cfg
	}
	o := AppOptions{Scene: base, Sink: sk, SampleDur: 100 * time.Millisecond, Out: out}
	for _, f := range opts {
		f(&o)
	}
	app, err := NewApp(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := app.Close(ctx); err != nil {
			t.Errorf("app.Close: %v", err)
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	})
	if cfg != nil {
		if _, err := app.StartScene(*cfg); err != nil {
			t.Fatal(err)
		}
	}
	return app, out
}

// do sends a request and returns the status and the body.
func do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// serve starts an httptest server for the App.
func serve(t *testing.T, app *App) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// waitTask polls GET /tasks/{id} until cond holds or the deadline passes.
func waitTask(t *testing.T, base, id string, within time.Duration, cond func(taskView) bool) taskView {
	t.Helper()
	deadline := time.Now().Add(within)
	var last taskView
	for {
		code, b := do(t, "GET", base+"/tasks/"+id, "")
		if code == http.StatusOK {
			last = decode[taskView](t, b)
			if cond(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: condition not met within %s; last: %+v", id, within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// states returns the states of a task's history, in order.
func states(v taskView) []string {
	out := make([]string, len(v.History))
	for i, h := range v.History {
		out[i] = h.State
	}
	return out
}

// inOrder reports whether want appears in got as a subsequence.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

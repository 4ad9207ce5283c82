package main

import (
	"net/http"
	"strings"
	"testing"
)

// The demo mounts the console at /console/, with the running scene's Queue
// and Restorer in its overview.
func TestConsoleMounted(t *testing.T) {
	cfg := testConfig()
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)
	resp, err := http.Get(srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /console/: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	code, b := do(t, "GET", srv.URL+"/console/api/overview", "")
	if code != http.StatusOK {
		t.Fatalf("GET /console/api/overview: %d %s", code, b)
	}
	o := decode[struct {
		Queue    *struct{ Records uint64 } `json:"queue"`
		Restorer *struct{ Ready int }      `json:"restorer"`
	}](t, b)
	if o.Queue == nil || o.Restorer == nil {
		t.Fatalf("the overview shows no live Queue and Restorer: %s", b)
	}
	if code, b := do(t, "GET", srv.URL+"/", ""); code != http.StatusOK || !strings.Contains(string(b), `href="console/"`) {
		t.Errorf("the dashboard does not link the console: %d", code)
	}
}

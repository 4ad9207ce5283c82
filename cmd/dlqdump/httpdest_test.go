package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// Issue 12, defect 10: only a 2xx answer to the POST itself is a delivery.
// An http.Client following a 301, 302 or 303 re-sends a GET without the
// body (and a 307 or 308 re-sends the POST elsewhere); before the fix that
// answer counted as a delivery and the records were deleted from the dump.
// Now a redirect is a refusal naming the status and the Location: nothing
// reaches the redirect's target, every record is kept (in quarantine, with
// that reason), and the exit status says some were not delivered.
func TestRestoreRedirectIsNotDelivery(t *testing.T) {
	for _, c := range []struct {
		name   string
		code   int
		status string
		to     string // path given to --to
	}{
		// Go's own ServeMux redirects /in when the handler is /in/ (301
		// before Go 1.22's routing, 307 since; asked below).
		{"ServeMux /in", 0, "", "/in"},
		{"301", http.StatusMovedPermanently, "301 Moved Permanently", "/old"},
		{"302", http.StatusFound, "302 Found", "/old"},
		{"303", http.StatusSeeOther, "303 See Other", "/old"},
		{"307", http.StatusTemporaryRedirect, "307 Temporary Redirect", "/old"},
		{"308", http.StatusPermanentRedirect, "308 Permanent Redirect", "/old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := makeSample(t)
			var mu sync.Mutex
			reached := map[string]int{} // method -> requests that reached /in/
			mux := http.NewServeMux()
			mux.HandleFunc("/in/", func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				reached[r.Method]++
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			})
			mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/in/", c.code)
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			if c.status == "" {
				// What this Go's ServeMux answers to a POST of /in.
				noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := noFollow.Post(srv.URL+c.to, "text/plain", strings.NewReader("probe"))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode < 300 || resp.StatusCode > 399 || resp.Header.Get("Location") != "/in/" {
					t.Fatalf("ServeMux answers POST /in with %s, Location %q; want a redirect to /in/", resp.Status, resp.Header.Get("Location"))
				}
				c.status = resp.Status
			}

			r := cli(t, exitUndelivered, "restore", dir, "--to", srv.URL+c.to)
			mu.Lock()
			got := fmt.Sprint(reached)
			n := len(reached)
			mu.Unlock()
			if n != 0 {
				t.Errorf("requests reached the redirect's target: %s; %s", got, r)
			}
			if !strings.Contains(r.stderr, "quarantined 20 records") {
				t.Errorf("the report does not count the 20 records as not delivered; %s", r)
			}
			// Every record is kept, with a reason naming the status and
			// where the redirect pointed.
			if names := areaNames(t, dir, sink.AreaReady); len(names) != 0 {
				t.Errorf("ready segments left: %v", names)
			}
			q := cli(t, 0, "cat", dir, "--area", "quarantine")
			want := fmt.Sprintf("POST %s%s: %s, Location %s/in/: a redirect is not a delivery", srv.URL, c.to, c.status, srv.URL)
			if n := strings.Count(q.stdout, want); n != 20 {
				t.Errorf("%d quarantined records give the reason %q, want 20; %s", n, want, q)
			}
		})
	}
}

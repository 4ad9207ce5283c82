package console_test

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/fs"
)

// Example_readme mounts the console in a program, behind the middleware
// that authenticates its users (here HTTP basic authentication), as the
// README shows.
func Example_readme() {
	dir, err := os.MkdirTemp("", "console-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	logger := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	// README:begin
	h, err := console.New(&console.Options{
		Reader: &fs.Reader{Directory: dir}, // or an *s3.Reader
		Name:   "orders DLQ",
		// Queue: q, Restorer: r,          // optional: live counters and rates
		// ReadOnly: true,                 // refuse every change, show no control
		Logger: logger, // every change: who asked, what
		User:   func(r *http.Request) string { u, _, _ := r.BasicAuth(); return u },
	})
	if err != nil {
		log.Fatal(err)
	}
	// Authentication is the middleware's job: the console has none.
	oncall := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "oncall" || p != os.Getenv("ONCALL_PASSWORD") {
				w.Header().Set("WWW-Authenticate", `Basic realm="dlq"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux.Handle("/dlq/", oncall(http.StripPrefix("/dlq", h)))
	// README:end

	os.Setenv("ONCALL_PASSWORD", "s3cret")
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, user string) int {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"all":true}`))
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.SetBasicAuth(user, "s3cret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println("page without a password:", do("GET", "/dlq/", ""))
	fmt.Println("page as oncall:", do("GET", "/dlq/", "oncall"))
	fmt.Println("a change without the page's token:", do("POST", "/dlq/api/release", "oncall"))
	// Output:
	// page without a password: 401
	// page as oncall: 200
	// a change without the page's token: 403
}

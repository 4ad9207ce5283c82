package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/fs"
)

// Example_readme mounts the console in a program, behind the middleware
// that authenticates its users (here HTTP basic authentication), with
// roles: a viewer looks, an operator acts, and the change log says who did
// what, as the README shows.
func Example_readme() {
	dir, err := os.MkdirTemp("", "console-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	logger := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	os.Setenv("ONCALL_PASSWORD", "s3cret")
	// README:begin
	// Your authentication (here HTTP basic auth; an SSO proxy's header, a
	// session) says who is behind a request; your table says their role.
	type userKey struct{}
	roles := map[string]console.Role{"alice": console.RoleOperator, "bob": console.RoleViewer, "carol": console.RoleAdmin}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if _, known := roles[u]; !ok || !known || p != os.Getenv("ONCALL_PASSWORD") {
				w.Header().Set("WWW-Authenticate", `Basic realm="dlq"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
		})
	}
	h, err := console.New(&console.Options{
		Reader: &fs.Reader{Directory: dir}, // or an *s3.Reader
		Name:   "orders DLQ",
		// Queue: q, Restorer: r,          // optional: live counters and rates
		// ReadOnly: true,                 // everyone a viewer
		Logger: logger, // every change and refusal: who, what
		// Asked on every request: viewers look; operators replay records,
		// run jobs and release segments; admins also discard records.
		Authorize: func(r *http.Request) (console.Principal, error) {
			u, ok := r.Context().Value(userKey{}).(string)
			if !ok {
				return console.Principal{}, console.ErrUnauthenticated
			}
			return console.Principal{Name: u, Role: roles[u]}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux.Handle("/dlq/", authenticate(http.StripPrefix("/dlq", h)))
	// README:end

	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, user, token, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Dlqdump-Token", token)
		if user != "" {
			req.SetBasicAuth(user, "s3cret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Token string `json:"token"`
			Role  string `json:"role"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if m.Token != "" {
			return resp.StatusCode, m.Token
		}
		return resp.StatusCode, m.Role
	}
	code, _ := do("GET", "/dlq/", "", "", "")
	fmt.Println("page without a password:", code)
	code, role := do("GET", "/dlq/api/meta", "bob", "", "")
	fmt.Println("bob sees the page as a", role+":", code)
	_, token := do("GET", "/dlq/api/meta", "alice", "", "")
	job := `{"id":"redrive-1","select":"reason = failed","reason":"INC-42"}`
	code, _ = do("POST", "/dlq/api/jobs", "bob", token, job)
	fmt.Println("bob creates a job:", code)
	code, _ = do("POST", "/dlq/api/jobs", "alice", token, job)
	fmt.Println("alice creates a job:", code)
	code, _ = do("POST", "/dlq/api/release", "alice", token, `{"all":true}`)
	fmt.Println("alice releases the whole quarantine:", code)

	l, _ := changelog.Open(&fs.Reader{Directory: dir})
	for e := range l.Newest(context.Background()) {
		fmt.Println("change log:", e.Actor, e.Role, e.Action, e.Scope, "-", e.Reason)
	}
	// Output:
	// page without a password: 401
	// bob sees the page as a viewer: 200
	// bob creates a job: 403
	// alice creates a job: 201
	// alice releases the whole quarantine: 403
	// change log: alice operator job.create job redrive-1 - INC-42
}

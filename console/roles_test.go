package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/console"
	dfs "github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// snapshot returns every file of dir with a hash of its bytes.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[strings.TrimPrefix(p, dir)] = hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(a, b map[string]string) string {
	var d []string
	for k, v := range b {
		if a[k] != v {
			d = append(d, "changed or added "+k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			d = append(d, "removed "+k)
		}
	}
	return strings.Join(d, ", ")
}

// rolesConsole serves a console whose Authorize takes the user from the
// X-Test-User header: viewer, operator, admin, or anyone else (refused).
func rolesConsole(t *testing.T, dir string) (string, func(user, path, body string) (int, string), *console.Handler) {
	roles := map[string]console.Role{"vic": console.RoleViewer, "olga": console.RoleOperator, "ada": console.RoleAdmin, "nobody": 0}
	srv, h := serve(t, &console.Options{Reader: &dfs.Reader{Directory: dir}, Name: dir,
		Authorize: func(r *http.Request) (console.Principal, error) {
			u := r.Header.Get("X-Test-User")
			if u == "" {
				return console.Principal{}, fmt.Errorf("no X-Test-User: %w", console.ErrUnauthenticated)
			}
			role, ok := roles[u]
			if !ok {
				return console.Principal{}, errors.New("unknown user " + u)
			}
			return console.Principal{Name: u, Role: role}, nil
		}})
	get := func(user, path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/dlq/"+path, nil)
		req.Header.Set("X-Test-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Content-Type")
	}
	for _, c := range []struct {
		user string
		code int
	}{{"", 401}, {"mallory", 403}, {"nobody", 403}, {"vic", 200}, {"olga", 200}, {"ada", 200}} {
		for _, path := range []string{"", "api/meta", "api/records", "api/log", "static/app.js"} {
			if code, _ := get(c.user, path); code != c.code {
				t.Errorf("GET /%s as %q: %d, want %d", path, c.user, code, c.code)
			}
		}
	}
	var meta struct {
		Token string   `json:"token"`
		Role  string   `json:"role"`
		Can   []string `json:"can"`
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/dlq/api/meta", nil)
	req.Header.Set("X-Test-User", "ada")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeJSON(resp, &meta); err != nil || meta.Token == "" || meta.Role != "admin" || len(meta.Can) != 5 {
		t.Fatalf("meta as an admin: %+v, %v", meta, err)
	}
	tok := meta.Token
	post := func(user, path, body string) (int, string) {
		return postJSON(t, srv, path, map[string]string{"X-Test-User": user, "X-Dlqdump-Token": tok}, body)
	}
	return tok, post, h
}

// TestRoles: every change the console makes (each pattern it serves) is
// refused to a viewer, changing nothing, and those an admin alone may make
// to an operator; the change log records who made the others, with the
// role.
func TestRoles(t *testing.T) {
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 300, segment: 100, needleAt: -1, quarantine: 10})
	st, err := jobs.Open(&dfs.Reader{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(context.Background(), jobs.Spec{ID: "job-1", At: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, post, h := rolesConsole(t, dir)
	var quarName string
	for n := range names(t, dir, sink.AreaQuarantine) {
		quarName = n
	}
	var recs struct {
		Records []struct {
			ID string `json:"id"`
		} `json:"records"`
	}
	srvRecs(t, dir, &recs)
	id := recs.Records[0].ID

	// The requests of each change, and the role each needs.
	type req struct {
		path, body string
		role       console.Role
	}
	cases := map[string][]req{
		"POST /api/jobs": {{"jobs", `{"id":"new-job"}`, console.RoleOperator}},
		"POST /api/jobs/{id}/{verb}": {{"jobs/job-1/pause", `{}`, console.RoleOperator}, {"jobs/job-1/resume", `{}`, console.RoleOperator},
			{"jobs/job-1/cancel", `{}`, console.RoleOperator}},
		"POST /api/release": {{"release", `{"segments":["` + quarName + `"]}`, console.RoleOperator}, {"release", `{"all":true}`, console.RoleAdmin}},
		"POST /api/replay":  {{"replay", `{"ids":["` + id + `"]}`, console.RoleOperator}},
		"POST /api/discard": {{"discard", `{"ids":["` + id + `"],"reason":"test"}`, console.RoleAdmin}},
	}
	patterns := console.ChangePatterns(h)
	for p := range patterns {
		if _, ok := cases[p]; !ok {
			t.Errorf("the console serves the change %s, which this test does not try: add its requests", p)
		}
	}
	before := snapshot(t, dir)
	for p, rs := range cases {
		if _, ok := patterns[p]; !ok {
			t.Errorf("the console no longer serves %s", p)
		}
		for _, r := range rs {
			for _, user := range []string{"vic", "olga"} {
				if user == "olga" && r.role <= console.RoleOperator {
					continue
				}
				code, out := post(user, r.path, r.body)
				if code != http.StatusForbidden || !strings.Contains(out, "role") {
					t.Errorf("POST %s %s as %s: %d %s, want 403 naming the role", r.path, r.body, user, code, out)
				}
			}
		}
	}
	if d := diff(before, snapshot(t, dir)); d != "" {
		t.Fatalf("refused changes changed the store: %s", d)
	}
	// Allowed, they are logged with who and the role.
	if code, out := post("olga", "jobs/job-1/pause", `{"reason":"INC-9"}`); code != http.StatusOK {
		t.Fatalf("pause as an operator: %d %s", code, out)
	}
	if code, out := post("ada", "discard", `{"ids":["`+id+`"],"reason":"poison"}`); code != http.StatusOK || !strings.Contains(out, `"discarded":1`) {
		t.Fatalf("discard as an admin: %d %s", code, out)
	}
	if code, out := post("ada", "discard", `{"ids":["`+id+`"]}`); code != http.StatusBadRequest || !strings.Contains(out, "reason is required") {
		t.Fatalf("discard without a reason: %d %s", code, out)
	}
	l, err := changelog.Open(&dfs.Reader{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for e, err := range l.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %s: %s", e.Actor, e.Role, e.Via, e.Action, e.Scope, e.Reason))
	}
	want := []string{"olga operator console job.pause job job-1: INC-9", "ada admin console discard records " + id + ": poison"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("change log:\n%q\nwant\n%q", got, want)
	}
}

func srvRecs(t *testing.T, dir string, v any) {
	t.Helper()
	srv, _ := serve(t, &console.Options{Reader: &dfs.Reader{Directory: dir}})
	getJSON(t, srv, "records", url.Values{"n": {"1"}}, v)
}

func decodeJSON(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/errcorpus"
)

// The APIs of the error groups page and the transform's preview: what
// they answer, what they refuse, and that a read-only console runs no
// program.
func TestErrorsAndPreviewAPI(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	if _, err := errcorpus.Write(context.Background(), rd, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 6*time.Hour, 3000); err != nil {
		t.Fatal(err)
	}
	srv, _ := serve(t, &console.Options{Reader: rd})
	var groups struct {
		Records  uint64 `json:"records"`
		Groups   int    `json:"groups"`
		Complete bool   `json:"complete"`
		Shown    []struct {
			Signature string   `json:"signature"`
			Count     uint64   `json:"count"`
			Counts    []uint64 `json:"counts"`
			Select    string   `json:"select"`
		} `json:"shown"`
	}
	if code := getJSON(t, srv, "errors", url.Values{"top": {"2"}, "bars": {"6"}, "select": {"source = orders"}}, &groups); code != http.StatusOK {
		t.Fatalf("errors: %d", code)
	}
	if !groups.Complete || groups.Records != uint64(errcorpus.Total()/2) || groups.Groups != 10 || len(groups.Shown) != 2 || len(groups.Shown[0].Counts) > 6 ||
		groups.Shown[0].Select != `error like "payment gateway timeout after <num>ms"` {
		t.Fatalf("errors: %+v", groups)
	}
	var bad map[string]any
	for _, q := range []url.Values{{"top": {"0"}}, {"bars": {"x"}}, {"select": {"error like"}}} {
		if code := getJSON(t, srv, "errors", q, &bad); code != http.StatusBadRequest {
			t.Errorf("errors?%s: %d %v", q.Encode(), code, bad)
		}
	}

	var pv struct {
		Selection string `json:"selection"`
		Changes   []struct {
			ID, Diff, Error string
		} `json:"changes"`
		Looked int `json:"looked"`
	}
	q := url.Values{"select": {`error like "deadline exceeded"`}, "jq": {`if .payload.n % 2 == 0 then error("even") else .payload.fixed = true end`}, "n": {"4"}}
	if code := getJSON(t, srv, "preview", q, &pv); code != http.StatusOK {
		t.Fatalf("preview: %d", code)
	}
	if len(pv.Changes) != 4 || pv.Looked != 4 || pv.Selection != `error like "deadline exceeded"` {
		t.Fatalf("preview: %+v", pv)
	}
	refused, changed := 0, 0
	for _, c := range pv.Changes {
		switch {
		case strings.Contains(c.Error, "transform: jq: error: even"):
			refused++
		case strings.Contains(c.Diff, `+    "fixed": true,`):
			changed++
		default:
			t.Errorf("change %+v", c)
		}
	}
	if refused == 0 || changed == 0 {
		t.Errorf("%d refused, %d changed", refused, changed)
	}
	// The preview runs the program as the job would, keeping the layout.
	q.Set("keep", "1")
	if code := getJSON(t, srv, "preview", q, &pv); code != http.StatusOK || len(pv.Changes) != 4 {
		t.Fatalf("preview keeping the layout: %d %+v", code, pv)
	}
	// A job keeps the option; it is refused without a program.
	hdr := map[string]string{"X-Dlqdump-Token": token(t, srv), "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	if code, body := postJSON(t, srv, "jobs", hdr, `{"id":"keep","jq":".payload.fixed = true","jq_keep_layout":true}`); code != http.StatusCreated || !strings.Contains(body, `"jq_keep_layout":true`) {
		t.Errorf("a job keeping the layout: %d %s", code, body)
	}
	if code, body := postJSON(t, srv, "jobs", hdr, `{"id":"keep-no-jq","jq_keep_layout":true}`); code != http.StatusBadRequest || !strings.Contains(body, "JQKeepLayout") {
		t.Errorf("keeping the layout without a program: %d %s", code, body)
	}
	var jqErr struct {
		Error  string `json:"error"`
		Column int    `json:"column"`
		Caret  string `json:"caret"`
	}
	if code := getJSON(t, srv, "preview", url.Values{"jq": {".payload | frob"}}, &jqErr); code != http.StatusBadRequest || jqErr.Column != 12 || !strings.Contains(jqErr.Caret, "^^^^") {
		t.Errorf("a bad program: %d %+v", code, jqErr)
	}

	ro, _ := serve(t, &console.Options{Reader: rd, ReadOnly: true})
	if code := getJSON(t, ro, "preview", url.Values{"jq": {"."}}, &bad); code != http.StatusForbidden {
		t.Errorf("a read-only console previews: %d", code)
	}
	if code := getJSON(t, ro, "errors", nil, &groups); code != http.StatusOK || groups.Records != uint64(errcorpus.Total()) {
		t.Errorf("a read-only console's error groups: %d %+v", code, groups)
	}
}

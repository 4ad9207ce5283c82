package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// searchAll pages through a search to its end and returns every record's
// (segment, seq) and how many requests it took.
func searchAll(t *testing.T, srvURL func(q url.Values) page, q url.Values) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	requests := 0
	for {
		p := srvURL(q)
		requests++
		for _, r := range p.Records {
			seen[fmt.Sprintf("%s#%d", r.Segment, r.Seq)]++
		}
		if p.Next == "" {
			return seen, requests
		}
		q.Set("after", p.Next)
		if requests > 10000 {
			t.Fatal("the search does not end")
		}
	}
}

func TestRecordsPaging(t *testing.T) {
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 5000, segment: 1200, needleAt: 4321})
	srv, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	get := func(q url.Values) page {
		var p page
		if code := getJSON(t, srv, "records", q, &p); code != http.StatusOK {
			t.Fatalf("GET records?%s: %d", q.Encode(), code)
		}
		return p
	}

	// Every record once, in pages of 70, across segment boundaries.
	seen, requests := searchAll(t, get, url.Values{"n": {"70"}})
	if len(seen) != 5000 {
		t.Fatalf("paging through everything saw %d records, want 5000", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s seen %d times", k, n)
		}
	}
	t.Logf("5000 records in %d pages", requests)

	// A header filter: every third record.
	seen, _ = searchAll(t, get, url.Values{"n": {"50"}, "where": {"reason=leak"}})
	if len(seen) != 1667 {
		t.Errorf("reason=leak: %d records, want 1667", len(seen))
	}

	// Payload text: the one record.
	p := get(url.Values{"q": {needle}})
	for p.Next != "" && len(p.Records) == 0 {
		p = get(url.Values{"q": {needle}, "after": {p.Next}})
	}
	if len(p.Records) != 1 || p.Records[0].Headers["n"] != "4321" || p.Records[0].Payload.Kind != "json" {
		t.Fatalf("payload search: %+v", p.Records)
	}

	// A JSON path with a value, and one that only exists.
	seen, _ = searchAll(t, get, url.Values{"path": {"$.user.email"}, "value": {"on.call@example.com"}})
	if len(seen) != 1 {
		t.Errorf("$.user.email = on.call@example.com: %d records, want 1", len(seen))
	}
	seen, _ = searchAll(t, get, url.Values{"path": {"oncall_note"}})
	if len(seen) != 1 {
		t.Errorf("$.oncall_note exists: %d records, want 1", len(seen))
	}
	if code := getJSON(t, srv, "records", url.Values{"path": {"a..b"}}, nil); code != http.StatusBadRequest {
		t.Errorf("a bad path: %d, want 400", code)
	}

	// Names that are not segments' never reach the sink.
	for _, bad := range []string{"../../etc/passwd", "x/y.dlq", ".tables.dlq", "a.txt"} {
		if code := getJSON(t, srv, "record", url.Values{"area": {"ready"}, "segment": {bad}, "seq": {"0"}}, nil); code != http.StatusBadRequest {
			t.Errorf("GET record of segment %q: %d, want 400", bad, code)
		}
		if code := getJSON(t, srv, "records", url.Values{"segment": {bad}}, nil); code != http.StatusBadRequest {
			t.Errorf("GET records of segment %q: %d, want 400", bad, code)
		}
	}

	// Markup stays text: the API gives it as a string, and the page
	// shows it with textContent (the browser test checks that).
	seen, _ = searchAll(t, get, url.Values{"q": {"<script>"}})
	if len(seen) != 1 {
		t.Errorf("<script> payload: %d records", len(seen))
	}
}

func TestReadOnlyAndForgedChanges(t *testing.T) {
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 100, segment: 100, needleAt: -1, quarantine: 10})
	quar := names(t, dir, sink.AreaQuarantine)
	var name string
	for n := range quar {
		name = n
	}
	body := `{"segments":["` + name + `"]}`

	ro, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}, ReadOnly: true})
	if tok := token(t, ro); tok != "" {
		t.Errorf("a read-only console gives a token: %q", tok)
	}
	for _, path := range []string{"release", "jobs", "jobs/x/cancel"} {
		if code, out := postJSON(t, ro, path, nil, body); code != http.StatusForbidden {
			t.Errorf("read-only POST %s: %d %s, want 403", path, code, out)
		}
	}

	rw, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	tok := token(t, rw)
	wrong := "0" + tok[1:]
	if tok[0] == '0' {
		wrong = "1" + tok[1:]
	}
	for _, c := range []struct {
		what string
		hdr  map[string]string
	}{
		{"no token", nil},
		{"a wrong token", map[string]string{"X-Dlqdump-Token": wrong}},
		{"another site's page", map[string]string{"X-Dlqdump-Token": tok, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
	} {
		if code, out := postJSON(t, rw, "release", c.hdr, body); code != http.StatusForbidden {
			t.Errorf("POST release with %s: %d %s, want 403", c.what, code, out)
		}
	}
	if got := names(t, dir, sink.AreaQuarantine); len(got) != 1 {
		t.Fatalf("a refused POST changed the store: quarantine %v", got)
	}
	// The page's own POST.
	code, out := postJSON(t, rw, "release", map[string]string{"X-Dlqdump-Token": tok, "Origin": rw.URL, "Sec-Fetch-Site": "same-origin"}, body)
	if code != http.StatusOK || !strings.Contains(out, name) {
		t.Fatalf("POST release: %d %s", code, out)
	}
	if names(t, dir, sink.AreaQuarantine)[name] || !names(t, dir, sink.AreaReady)[name] {
		t.Fatal("the released segment is not ready")
	}
}

func TestEncryptedMetadataOnly(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 300, segment: 300, needleAt: 7,
		encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{id.Recipient()}}})

	srv, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	var p page
	getJSON(t, srv, "records", nil, &p)
	if len(p.Records) == 0 {
		t.Fatal("no rows for an encrypted segment")
	}
	var n uint32
	for _, r := range p.Records {
		if !r.Sealed || r.Payload != nil || r.Headers != nil || r.Encrypted == "" {
			t.Fatalf("without a key a record shows more than metadata: %+v", r)
		}
		n += r.Count
	}
	if n != 300 {
		t.Errorf("sealed blocks count %d records, want 300", n)
	}
	getJSON(t, srv, "records", url.Values{"q": {needle}}, &p)
	if len(p.Records) != 0 || p.Unsearched != 300 {
		t.Errorf("a payload search without a key: %d rows, %d unsearched; want 0 and 300", len(p.Records), p.Unsearched)
	}

	keyed, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}, Keys: envelope.NewKeyring(id)})
	getJSON(t, keyed, "records", url.Values{"q": {needle}}, &p)
	if len(p.Records) != 1 || p.Records[0].Headers["n"] != "7" {
		t.Errorf("with the key, the payload search finds %+v", p.Records)
	}
}

func TestOverview(t *testing.T) {
	dir := t.TempDir()
	makeStore(t, dir, storeOpts{n: 3000, segment: 1000, needleAt: -1, quarantine: 30})
	srv, _ := serve(t, &console.Options{Reader: &fs.Reader{Directory: dir}})
	var o struct {
		Areas map[string]struct {
			Segments int    `json:"segments"`
			Records  uint64 `json:"records"`
		} `json:"areas"`
		Reasons struct {
			Series []struct {
				Name  string `json:"name"`
				Total uint64 `json:"total"`
			} `json:"series"`
		} `json:"by_reason"`
		Charts struct {
			Complete bool `json:"complete"`
		} `json:"charts"`
	}
	for range 100 {
		getJSON(t, srv, "overview", nil, &o)
		if o.Charts.Complete {
			break
		}
	}
	if o.Areas["ready"].Records != 3000 || o.Areas["ready"].Segments != 3 || o.Areas["quarantine"].Records != 30 {
		t.Errorf("areas: %+v", o.Areas)
	}
	totals := map[string]uint64{}
	for _, s := range o.Reasons.Series {
		totals[s.Name] = s.Total
	}
	if totals["failed"] != 1010 || totals["leak"] != 1010 || totals["deadline"] != 1010 {
		t.Errorf("by reason: %v, want 1010 each", totals)
	}
	_ = context.Background
}

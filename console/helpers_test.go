package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
	"github.com/dlqdump/dlqdump/sink"
)

// reasons and errs are the headers the test stores give their records,
// record i the i-th of each, cyclically.
var (
	reasons = []string{"failed", "leak", "deadline"}
	errs    = []string{"timeout after 5s", "connection refused", "HTTP 503 from billing", "invalid currency"}
)

// Marked records of a test store.
const (
	needle  = "needle-7f3a9c"               // in the payload of record needleAt only
	markup  = `<script>alert("x")</script>` // the payload of record markupAt
	markupI = 3
)

// storeOpts shape a test store.
type storeOpts struct {
	n          int // records
	segment    int // records per segment
	needleAt   int
	quarantine int // records of one more segment, moved to quarantine with a reason
	encryption *dlqdump.Encryption
}

// makeStore writes a dump of o.n records into dir: realistic JSON payloads,
// headers reason, error and source, in segments of o.segment records; record
// o.needleAt holds the needle, record markupI is markup.
func makeStore(t testing.TB, dir string, o storeOpts) {
	t.Helper()
	g := gen.New(1)
	write := func(from, to int) {
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 64 * dlqdump.Megabyte,
			Encryption: o.encryption})
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			p := g.Event(300)
			switch i {
			case o.needleAt:
				p = []byte(fmt.Sprintf(`{"id":"evt_%d","oncall_note":"%s","user":{"email":"on.call@example.com"}}`, i, needle))
			case markupI:
				p = []byte(markup)
			}
			h := dlqdump.Headers{dlqdump.HeaderReason: reasons[i%len(reasons)], dlqdump.HeaderError: errs[i%len(errs)],
				dlqdump.HeaderSource: "orders", "n": fmt.Sprint(i)}
			if err := q.Enqueue(dlqdump.Envelope{Item: p, Headers: h}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for from := 0; from < o.n; from += o.segment {
		write(from, min(o.n, from+o.segment))
	}
	if o.quarantine > 0 {
		before := names(t, dir, sink.AreaReady)
		write(o.n, o.n+o.quarantine)
		for n := range names(t, dir, sink.AreaReady) {
			if !before[n] {
				rd := &fs.Reader{Directory: dir}
				if err := rd.Move(context.Background(), n, sink.AreaReady, sink.AreaQuarantine, "version 2.0.0.0, restorer expects 1.0.0.0"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// names returns the names of an area's segments.
func names(t testing.TB, dir string, area sink.Area) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for si, err := range (&fs.Reader{Directory: dir}).List(context.Background(), area) {
		if err != nil {
			t.Fatal(err)
		}
		out[si.Name] = true
	}
	return out
}

// serve starts a console over dir.
func serve(t testing.TB, o *console.Options) (*httptest.Server, *console.Handler) {
	t.Helper()
	if o.SearchBudget == 0 {
		// The default (1s) runs out under -race on a loaded machine, and
		// an answer cut short fails tests that check what it counts
		// (issue 30); the tests of the budget set theirs.
		cp := *o
		cp.SearchBudget = time.Hour
		o = &cp
	}
	h, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/dlq/", http.StripPrefix("/dlq", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, h
}

// getJSON GETs a console API and decodes its answer.
func getJSON(t testing.TB, srv *httptest.Server, path string, q url.Values, v any) int {
	t.Helper()
	u := srv.URL + "/dlq/api/" + path
	if q != nil {
		u += "?" + q.Encode()
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", u, err, b)
		}
	}
	return resp.StatusCode
}

// postJSON POSTs a body with the given headers and returns the status and
// the answer.
func postJSON(t testing.TB, srv *httptest.Server, path string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/dlq/api/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// page is an answer of api/records.
type page struct {
	Records []struct {
		Segment string            `json:"segment"`
		Area    string            `json:"area"`
		Seq     uint64            `json:"seq"`
		Headers map[string]string `json:"headers"`
		Payload *struct {
			Kind, Text string
		} `json:"payload"`
		Sealed    bool   `json:"sealed"`
		Count     uint32 `json:"count"`
		Encrypted string `json:"encrypted"`
	} `json:"records"`
	Next       string `json:"next"`
	Scanned    uint64 `json:"scanned"`
	Unsearched uint64 `json:"unsearched"`
	Done       bool   `json:"done"`
}

// token returns the console's token for changes.
func token(t testing.TB, srv *httptest.Server) string {
	t.Helper()
	var m struct {
		Token    string `json:"token"`
		ReadOnly bool   `json:"read_only"`
	}
	getJSON(t, srv, "meta", nil, &m)
	return m.Token
}

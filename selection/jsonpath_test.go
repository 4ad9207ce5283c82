package selection

import (
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump/segment"
)

func TestJSONPath(t *testing.T) {
	doc := []byte(`{"id":"evt_1","user":{"id":7,"email":"a@b.c","tags":["x","y"]},"items":[{"sku":"A-1"},{"sku":"B-2","qty":2.5}],
		"odd key]":{"n":null},"ok":true,"esc":"caf\u00e9 \"q\""}`)
	for _, c := range []struct {
		path, want string
		ok         bool
	}{
		{"$.id", "evt_1", true},
		{"id", "evt_1", true},
		{"user.email", "a@b.c", true},
		{"$.user.id", "7", true},
		{"$.user.tags[1]", "y", true},
		{"$.items[1].sku", "B-2", true},
		{"$.items[1].qty", "2.5", true},
		{"items[0]", `{"sku":"A-1"}`, true},
		{`$["odd key]"].n`, "null", true},
		{"$.ok", "true", true},
		{"$.esc", `café "q"`, true},
		{"$.items[2].sku", "", false},
		{"$.user.missing", "", false},
		{"$.id.deeper", "", false},
		{"$.user[0]", "", false},
	} {
		p, err := ParseJSONPath(c.path)
		if err != nil {
			t.Errorf("ParseJSONPath(%q): %v", c.path, err)
			continue
		}
		got, ok := p.Lookup(doc)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: %q, %v; want %q, %v", c.path, got, ok, c.want, c.ok)
		}
	}
	for _, bad := range []string{"", "$", "a..b", "a[", "a[x]", "a[-1]", `a["x"`} {
		if _, err := ParseJSONPath(bad); !errors.Is(err, ErrPath) {
			t.Errorf("ParseJSONPath(%q): %v, want ErrPath", bad, err)
		}
	}
	p, _ := ParseJSONPath("a")
	if _, ok := p.Lookup([]byte("not json")); ok {
		t.Error("a path found something in text that is not JSON")
	}
}

// The quick test of Match (a value absent from an unescaped text) never
// refuses a record the path would select.
func TestFilterPathValue(t *testing.T) {
	f, err := JSON("$.name", "café", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		payload string
		want    bool
	}{
		{`{"name":"café"}`, true},
		{`{"name":"caf\u00e9"}`, true},
		{`{"name":"cafe"}`, false},
		{`{"other":"café"}`, false},
	} {
		rec := segment.Record{Payload: []byte(c.payload)}
		if got := f.Match(nil, &rec); got != c.want {
			t.Errorf("%s: %v, want %v", c.payload, got, c.want)
		}
	}
}

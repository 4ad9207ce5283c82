package transform_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/transform"
)

var testID, _ = dlqdump.ParseRecordID("019a3f2c7d1e5b8a90c4d2e1-42")

func replay(payload string, h dlqdump.Headers) *dlqdump.Replay {
	return &dlqdump.Replay{ID: testID, Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Payload: []byte(payload), Headers: h}
}

func TestCompileErrorsNamePosition(t *testing.T) {
	for _, tc := range []struct {
		expr, part, msg string
		col             int
	}{
		{".payload.email |= ascii_downcase |", "", "unexpected EOF", 35},
		{".payload | frobnicate", "frobnicate", "function not defined: frobnicate/0", 12},
		{"def f: 1; .payload.n = f | .x = $nope", "$nope", "variable not defined: $nope", 33},
		{".payload.a = (1 + ]", "]", `unexpected token "]"`, 19},
		{`.payload.s = "abc`, `"abc`, "unterminated string literal", 14},
		{"   ", "", "an empty program", 1},
	} {
		_, err := transform.CompileJQ(tc.expr, nil)
		var e *transform.Error
		if !errors.As(err, &e) || !errors.Is(err, transform.ErrJQ) {
			t.Fatalf("%q: %v, want an *Error", tc.expr, err)
		}
		if e.Column() != tc.col || !strings.Contains(err.Error(), tc.msg) || tc.part != "" && !strings.Contains(err.Error(), fmt.Sprintf("(%q)", tc.part)) {
			t.Errorf("%q: %v (column %d), want column %d, %q, naming %q", tc.expr, err, e.Column(), tc.col, tc.msg, tc.part)
		}
		if !strings.Contains(e.Caret(), "^") {
			t.Errorf("%q: caret %q", tc.expr, e.Caret())
		}
	}
}

func run(t *testing.T, expr string, r *dlqdump.Replay) error {
	t.Helper()
	j, err := transform.CompileJQ(expr, &transform.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return j.Transform(context.Background(), r)
}

func TestJQTransforms(t *testing.T) {
	for _, tc := range []struct {
		name, expr, payload string
		headers             dlqdump.Headers
		want                string
		wantHeaders         dlqdump.Headers
	}{
		{"a field fix", ".payload.order.email |= ascii_downcase", `{"order":{"id":12345678901234567890,"email":"A@EXAMPLE.COM"},"amount":12.50}`,
			dlqdump.Headers{"reason": "failed"}, `{"amount":12.50,"order":{"email":"a@example.com","id":12345678901234567890}}`, dlqdump.Headers{"reason": "failed"}},
		{"headers", `.headers.error = null | .headers.fixed = "v2" | .headers.n = (.payload.n | tostring)`, `{"n":3}`,
			dlqdump.Headers{"error": "boom", "reason": "failed"}, `{"n":3}`, dlqdump.Headers{"fixed": "v2", "n": "3", "reason": "failed"}},
		{"text stays text", ".payload |= ascii_upcase", "plain text, not json", nil, "PLAIN TEXT, NOT JSON", dlqdump.Headers{}},
		{"a JSON string stays JSON", `.payload |= . + "!"`, `"hi"`, nil, `"hi!"`, dlqdump.Headers{}},
		{"binary passes through", `.headers.x = (.payload_base64 | tostring)`, "\xffab", nil, "\xffab", dlqdump.Headers{"x": "true"}},
		{"binary set", `.payload = ("/w==" )`, "\xffab", nil, "\xff", dlqdump.Headers{}},
		{"id and time are read", `.payload.id = .id | .payload.t = .time`, `{}`, nil,
			`{"id":"019a3f2c7d1e5b8a90c4d2e1-42","t":"2026-03-01T12:00:00Z"}`, dlqdump.Headers{}},
		{"no environment", `.payload.env = $ENV`, `{}`, nil, `{"env":{}}`, dlqdump.Headers{}},
		{"html is not escaped", `.payload.s = "<a&b>"`, `{}`, nil, `{"s":"<a&b>"}`, dlqdump.Headers{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.headers
			if h == nil {
				h = dlqdump.Headers{}
			}
			r := replay(tc.payload, h)
			if err := run(t, tc.expr, r); err != nil {
				t.Fatal(err)
			}
			if string(r.Payload) != tc.want {
				t.Errorf("payload %q, want %q", r.Payload, tc.want)
			}
			if len(r.Headers) != len(tc.wantHeaders) {
				t.Errorf("headers %v, want %v", r.Headers, tc.wantHeaders)
			}
			for k, v := range tc.wantHeaders {
				if r.Headers[k] != v {
					t.Errorf("headers %v, want %v", r.Headers, tc.wantHeaders)
				}
			}
		})
	}
}

func TestJQFailuresLeaveTheRecord(t *testing.T) {
	for _, tc := range []struct{ expr, payload, want string }{
		{`error("no customer")`, `{}`, "jq: error: no customer"},
		{`select(.payload.ok)`, `{"ok":false}`, "no result"},
		{`., .`, `{}`, "more than one result"},
		{`.payload.a`, `{"a":1}`, "returned a number, want the record"},
		{`{headers: .headers}`, `{}`, "has no payload"},
		{`.headers.n = 1`, `{}`, `header "n" is a number`},
		{`.payload.a |= ascii_downcase`, `{"a":1}`, "jq: ascii_downcase cannot be applied to: number (1)"},
		{`last(range(1e15))`, `{}`, "took longer than"},
		{`.payload_base64 = true | .payload = "@@"`, `{}`, "not base64"},
	} {
		r := replay(tc.payload, dlqdump.Headers{"reason": "x"})
		err := run(t, tc.expr, r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.expr, err, tc.want)
		}
		if string(r.Payload) != tc.payload || r.Headers["reason"] != "x" || len(r.Headers) != 1 {
			t.Errorf("%s: the record changed: %q %v", tc.expr, r.Payload, r.Headers)
		}
	}
	// The pass's context ending is its error, not the program's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	j, _ := transform.CompileJQ(`last(range(1e15))`, nil)
	if err := j.Transform(ctx, replay(`{}`, nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestDiff(t *testing.T) {
	before := replay(`{"order":{"email":"A@EXAMPLE.COM","id":"ord-7"}}`, dlqdump.Headers{"reason": "failed"})
	after := replay(`{"order":{"email":"a@example.com","id":"ord-7"}}`, dlqdump.Headers{"reason": "failed"})
	want := `--- stored 019a3f2c7d1e5b8a90c4d2e1-42
+++ delivered 019a3f2c7d1e5b8a90c4d2e1-42
@@ -4,7 +4,7 @@
   },
   "payload": {
     "order": {
-      "email": "A@EXAMPLE.COM",
+      "email": "a@example.com",
       "id": "ord-7"
     }
   }
`
	if got := transform.Diff(before, after); got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	if got := transform.Diff(before, before); got != "" {
		t.Errorf("no change: %q", got)
	}
}

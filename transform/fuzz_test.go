package transform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/transform"
)

// CompileJQ never panics, and its errors name a place in the program.
func FuzzCompileJQ(f *testing.F) {
	for _, s := range []string{".payload.email |= ascii_downcase", ".payload | foo(", `"abc`, "def f: f; f", "$x", "", ".[", "@base64d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		_, err := transform.CompileJQ(expr, nil)
		if err == nil {
			return
		}
		var e *transform.Error
		if !errors.As(err, &e) {
			t.Fatalf("%q: %v is not an *Error", expr, err)
		}
		if c := e.Column(); c < 0 || c > utf8.RuneCountInString(expr)+1 {
			t.Fatalf("%q: column %d", expr, c)
		}
		_ = e.Caret()
	})
}

// The program "." delivers every payload as stored: text and binary
// payloads byte for byte, JSON ones as the same value.
func FuzzIdentity(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1.5,"x",null,true]}`, "plain text", "\xff\x00", `12345678901234567890`, `"s"`, ``, ` {"a" : 1} `} {
		f.Add([]byte(s))
	}
	jq, err := transform.CompileJQ(".", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		r := &dlqdump.Replay{Payload: bytes.Clone(p), Headers: dlqdump.Headers{"k": "v"}}
		if err := jq.Transform(context.Background(), r); err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		// Numbers as json.Number: a JSON number too large for a float64
		// (2 followed by 400 zeros) is JSON all the same, its digits kept.
		a, ea := decodeNumbers(p)
		b, eb := decodeNumbers(r.Payload)
		if ea == nil && json.Valid(p) {
			if eb != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%q became %q", p, r.Payload)
			}
		} else if !bytes.Equal(p, r.Payload) {
			t.Fatalf("%q became %q", p, r.Payload)
		}
		if r.Headers["k"] != "v" || len(r.Headers) != 1 {
			t.Fatalf("headers %v", r.Headers)
		}
	})
}

// decodeNumbers decodes one JSON value, its numbers as json.Number.
func decodeNumbers(p []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one value")
	}
	return v, nil
}

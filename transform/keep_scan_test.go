package transform

import (
	"context"
	"testing"

	"github.com/dlqdump/dlqdump"
)

// With KeepLayout, a fix of one field that keeps its length changes the
// payload's bytes in place, in one scan, allocating nothing; one that
// changes the length writes a new payload once and leaves the stored
// bytes alone; the rest of the layout is kept either way.
func TestKeepSplice(t *testing.T) {
	stored := ` {"id":"evt_1", "user":{"id":5048945,"email":"E.Dubois@Shop.Example" ,"name":"X"},"n":[1, {"email":"KEEP"}]}`
	for _, tc := range []struct {
		prog, want string
		inPlace    bool
	}{
		{`.payload.user.email |= ascii_downcase`, ` {"id":"evt_1", "user":{"id":5048945,"email":"e.dubois@shop.example" ,"name":"X"},"n":[1, {"email":"KEEP"}]}`, true},
		{`.payload.user.email |= ascii_upcase | .payload.id = "evt_2"`, ` {"id":"evt_2", "user":{"id":5048945,"email":"E.DUBOIS@SHOP.EXAMPLE" ,"name":"X"},"n":[1, {"email":"KEEP"}]}`, true},
		{`.payload.user.email = "x" | .headers.fixed = "yes"`, ` {"id":"evt_1", "user":{"id":5048945,"email":"x" ,"name":"X"},"n":[1, {"email":"KEEP"}]}`, false},
		{`.payload.user.id |= tostring | .payload.id //= 1`, ` {"id":"evt_1", "user":{"id":"5048945","email":"E.Dubois@Shop.Example" ,"name":"X"},"n":[1, {"email":"KEEP"}]}`, false},
	} {
		j, err := CompileJQ(tc.prog, keepLayout)
		if err != nil {
			t.Fatal(err)
		}
		if !j.fast.splice {
			t.Fatalf("%s: not spliced", tc.prog)
		}
		r := &dlqdump.Replay{Payload: []byte(stored), Headers: dlqdump.Headers{}}
		in := r.Payload
		if err := j.Transform(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if string(r.Payload) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.prog, r.Payload, tc.want)
		}
		if same := &r.Payload[0] == &in[0]; same != tc.inPlace {
			t.Errorf("%s: changed in place %v, want %v", tc.prog, same, tc.inPlace)
		}
		if !tc.inPlace && string(in) != stored {
			t.Errorf("%s: the stored bytes became %s", tc.prog, in)
		}
	}
	j, err := CompileJQ(`.payload.user.email |= ascii_downcase`, keepLayout)
	if err != nil {
		t.Fatal(err)
	}
	r := &dlqdump.Replay{Payload: []byte(stored), Headers: dlqdump.Headers{}}
	if n := testing.AllocsPerRun(100, func() {
		if err := j.Transform(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 && !raceEnabled {
		t.Errorf("%v allocations a record, want 0", n)
	}
}

// Splicing leaves to keepRewrite (or gojq) what it does not do, and the
// record is not changed when it gives up: a duplicate key on the path, a
// member to create, a path through an array or a string, a payload that
// is not one JSON value.
func TestKeepSpliceGivesUp(t *testing.T) {
	j, err := CompileJQ(`.payload.a.b |= ascii_downcase`, keepLayout)
	if err != nil {
		t.Fatal(err)
	}
	var s splicer
	for _, p := range []string{
		`{"a":{"b":"X"},"a":{"b":"Y"}}`, `{"a":{"b":"X","b":"Y"}}`, `{"a":{}}`, `{"a":[{"b":"X"}]}`, `{"a":"b"}`,
		`{"a":{"b":"X"}} x`, `{"a":{"b":"X"}`, `{"a":{"b":"X\u0001"}}`, "{\"a\":{\"b\":\"\xff\"}}", `{"a":{"b":{"c":1}}}`,
	} {
		doc := []byte(p)
		if s.plan(doc, j.fast.payload, nil) {
			t.Errorf("%s: planned", p)
		}
		if string(doc) != p {
			t.Errorf("%s: changed to %s", p, doc)
		}
	}
	for _, p := range []string{`{"a":{"b":"X"}}`, ` { "a" : { "c" : [1,{"b":2}], "b" : "X" } , "b":{"b":"Y"}} `} {
		if !s.plan([]byte(p), j.fast.payload, nil) || len(s.spans) != 1 {
			t.Errorf("%s: not planned", p)
		}
	}
}

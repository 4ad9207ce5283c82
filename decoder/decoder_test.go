package decoder_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/encoder"
)

// The decoders are dlqdump.Decoders.
var (
	_ dlqdump.Decoder = decoder.Fallthrough{}
	_ dlqdump.Decoder = decoder.Unmarshaller{}
	_ dlqdump.Decoder = decoder.JSON{}
)

var errBoom = errors.New("boom")

// binItem marshals as "BIN:" + its bytes. Its UnmarshalBinary keeps its
// argument (allowed to by Unmarshaller, which hands it a copy).
type binItem struct{ b []byte }

func (x *binItem) MarshalBinary() ([]byte, error) { return append([]byte("BIN:"), x.b...), nil }

func (x *binItem) UnmarshalBinary(p []byte) error {
	rest, ok := bytes.CutPrefix(p, []byte("BIN:"))
	if !ok {
		return errBoom
	}
	x.b = rest // kept, not copied
	return nil
}

// gogoItem is a gogo/protobuf-style message: Size, MarshalTo, Unmarshal.
// Its Unmarshal keeps its argument.
type gogoItem struct{ b []byte }

func (g *gogoItem) Size() int                         { return len(g.b) }
func (g *gogoItem) MarshalTo(dst []byte) (int, error) { return copy(dst, g.b), nil }

func (g *gogoItem) Unmarshal(p []byte) error {
	if len(p) == 0 {
		return errBoom
	}
	g.b = p // kept, not copied
	return nil
}

// both has UnmarshalBinary and Unmarshal: UnmarshalBinary is preferred.
type both struct{ via string }

func (b *both) UnmarshalBinary([]byte) error { b.via = "UnmarshalBinary"; return nil }
func (b *both) Unmarshal([]byte) error       { b.via = "Unmarshal"; return nil }

type jsonItem struct {
	Name string   `json:"name"`
	N    int      `json:"n"`
	Tags []string `json:"tags,omitempty"`
}

// rawKeeper keeps the bytes UnmarshalJSON is given, against the
// json.Unmarshaler contract; the decoder must still not alias the record.
type rawKeeper struct{ raw []byte }

func (r *rawKeeper) UnmarshalJSON(p []byte) error { r.raw = p; return nil }

type decodeCase struct {
	name string
	dec  dlqdump.Decoder
	in   string
	want any // the item, when msg is empty

	msg   string // the error message contains msg
	also  string // and also, if not empty
	cause error  // the error wraps cause, if not nil

	shares bool // the item is p itself (Fallthrough without Copy)
}

func checkDecode(t *testing.T, c decodeCase) {
	t.Helper()
	p := []byte(c.in)
	got, err := c.dec.Decode(p)
	if c.msg != "" {
		if err == nil {
			t.Fatalf("Decode(%q) = %#v, nil error; want an error containing %q", c.in, got, c.msg)
		}
		if !errors.Is(err, decoder.ErrDecode) {
			t.Errorf("error %v does not wrap ErrDecode", err)
		}
		if !strings.HasPrefix(err.Error(), "dlqdump: decoder: ") {
			t.Errorf("error %q does not start with \"dlqdump: decoder: \"", err)
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("error %q does not contain %q", err, c.msg)
		}
		if !strings.Contains(err.Error(), c.also) {
			t.Errorf("error %q does not contain %q", err, c.also)
		}
		if c.cause != nil && !errors.Is(err, c.cause) {
			t.Errorf("error %v does not wrap %v", err, c.cause)
		}
		if got != nil {
			t.Errorf("on error Decode returned item %#v, want nil", got)
		}
		return
	}
	if err != nil {
		t.Fatalf("Decode(%q): %v", c.in, err)
	}
	if !equal(got, c.want) {
		t.Fatalf("Decode(%q) = %#v, want %#v", c.in, got, c.want)
	}
	if c.shares {
		// The item is p, capped: appending to it cannot write past it.
		b := got.([]byte)
		if cap(b) != len(b) || len(p) > 0 && &b[0] != &p[0] {
			t.Fatalf("Decode(%q) = %q with capacity %d: not p capped at its length", c.in, b, cap(b))
		}
		return
	}
	// The copy guarantee: p is reused by the caller after Decode.
	for i := range p {
		p[i] = 0xAA
	}
	if !equal(got, c.want) {
		t.Fatalf("after overwriting p, the item changed to %#v, want %#v", got, c.want)
	}
}

// equal compares items, protobuf messages with proto.Equal.
func equal(got, want any) bool {
	if g, ok := got.(proto.Message); ok {
		w, ok := want.(proto.Message)
		return ok && reflect.TypeOf(g) == reflect.TypeOf(w) && proto.Equal(g, w)
	}
	return reflect.DeepEqual(got, want)
}

func wire(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFallthrough(t *testing.T) {
	cases := []decodeCase{
		{name: "bytes", dec: decoder.Fallthrough{}, in: "hello", want: []byte("hello"), shares: true},
		{name: "binary", dec: decoder.Fallthrough{}, in: "\x00\xff\x01", want: []byte{0, 0xff, 1}, shares: true},
		{name: "empty is not nil", dec: decoder.Fallthrough{}, in: "", want: []byte{}, shares: true},
		{name: "copy", dec: decoder.Fallthrough{Copy: true}, in: "hello", want: []byte("hello")},
		{name: "copy binary", dec: decoder.Fallthrough{Copy: true}, in: "\x00\xff\x01", want: []byte{0, 0xff, 1}},
		{name: "copy empty is not nil", dec: decoder.Fallthrough{Copy: true}, in: "", want: []byte{}},
		{name: "string", dec: decoder.Fallthrough{AsString: true}, in: "hello", want: "hello"},
		{name: "empty string", dec: decoder.Fallthrough{AsString: true}, in: "", want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkDecode(t, c) })
	}
}

func TestUnmarshaller(t *testing.T) {
	newSV := func() any { return new(wrapperspb.StringValue) }
	sv := decoder.Unmarshaller{New: newSV}
	bv := decoder.Proto[wrapperspb.BytesValue]()
	bin := decoder.Unmarshaller{New: func() any { return new(binItem) }}
	gogo := decoder.Unmarshaller{New: func() any { return new(gogoItem) }}
	cases := []decodeCase{
		{name: "proto", dec: sv, in: wire(t, wrapperspb.String("hi")), want: wrapperspb.String("hi")},
		{name: "proto empty", dec: sv, in: "", want: &wrapperspb.StringValue{}},
		{name: "proto bytes field", dec: bv, in: wire(t, wrapperspb.Bytes([]byte("raw"))), want: wrapperspb.Bytes([]byte("raw"))},
		{name: "proto timestamp", dec: decoder.Proto[timestamppb.Timestamp](), in: wire(t, timestamppb.New(time.Unix(1_700_000_000, 5))), want: timestamppb.New(time.Unix(1_700_000_000, 5))},
		{name: "proto garbage", dec: sv, in: "\xff\xff\xff\xff", msg: "decoder.Unmarshaller into *wrapperspb.StringValue: proto:", also: "cannot parse invalid wire-format data"},
		{name: "proto truncated", dec: sv, in: wire(t, wrapperspb.String("hello"))[:4], msg: "decoder.Unmarshaller into *wrapperspb.StringValue: proto:"},
		{name: "proto invalid UTF-8", dec: sv, in: "\x0a\x01\xff", msg: "decoder.Unmarshaller into *wrapperspb.StringValue: string field contains invalid UTF-8"},
		{name: "BinaryUnmarshaler", dec: bin, in: "BIN:x", want: &binItem{b: []byte("x")}},
		{name: "BinaryUnmarshaler error", dec: bin, in: "garbage", cause: errBoom, msg: "decoder.Unmarshaller: *decoder_test.binItem.UnmarshalBinary: boom"},
		{name: "BinaryUnmarshaler time", dec: decoder.Unmarshaller{New: func() any { return new(time.Time) }}, in: "\x00", msg: "*time.Time.UnmarshalBinary: Time.UnmarshalBinary:"},
		{name: "BinaryUnmarshaler before Unmarshal", dec: decoder.Unmarshaller{New: func() any { return new(both) }}, in: "x", want: &both{via: "UnmarshalBinary"}},
		{name: "gogo", dec: gogo, in: "gogo", want: &gogoItem{b: []byte("gogo")}},
		{name: "gogo error", dec: gogo, in: "", cause: errBoom, msg: "decoder.Unmarshaller: *decoder_test.gogoItem.Unmarshal: boom"},
		{name: "nil New", dec: decoder.Unmarshaller{}, in: "x", msg: "dlqdump: decoder: cannot decode item: decoder.Unmarshaller.New is nil"},
		{name: "New returns nil", dec: decoder.Unmarshaller{New: func() any { return nil }}, in: "x", msg: "decoder.Unmarshaller.New returned nil"},
		{name: "New returns a nil pointer", dec: decoder.Unmarshaller{New: func() any { return (*wrapperspb.StringValue)(nil) }}, in: "x", msg: "decoder.Unmarshaller.New returned a nil *wrapperspb.StringValue"},
		{name: "New returns an unsupported type", dec: decoder.Unmarshaller{New: func() any { return new(int) }}, in: "x", msg: "decoder.Unmarshaller cannot decode into *int: not a proto.Message, encoding.BinaryUnmarshaler or Unmarshal([]byte) error"},
		{name: "New returns a value, not a pointer", dec: decoder.Unmarshaller{New: func() any { return binItem{} }}, in: "BIN:x", msg: "cannot decode into decoder_test.binItem"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkDecode(t, c) })
	}
}

func TestJSON(t *testing.T) {
	item := decoder.JSONOf[jsonItem]()
	strict := decoder.JSONOf[jsonItem]()
	strict.Strict = true
	cases := []decodeCase{
		{name: "struct", dec: item, in: `{"name":"a","n":1,"tags":["x","y"]}`, want: jsonItem{Name: "a", N: 1, Tags: []string{"x", "y"}}},
		{name: "pointer", dec: decoder.JSONOf[*jsonItem](), in: `{"name":"a","n":1}`, want: &jsonItem{Name: "a", N: 1}},
		{name: "null pointer", dec: decoder.JSONOf[*jsonItem](), in: `null`, want: (*jsonItem)(nil)},
		{name: "unknown field ignored", dec: item, in: `{"name":"a","extra":true}`, want: jsonItem{Name: "a"}},
		{name: "whitespace", dec: item, in: " {\"n\": 2}\n", want: jsonItem{N: 2}},
		{name: "map", dec: decoder.JSONOf[map[string]any](), in: `{"a":1,"b":[true,null]}`, want: map[string]any{"a": 1.0, "b": []any{true, nil}}},
		{name: "string", dec: decoder.JSONOf[string](), in: `"o-1"`, want: "o-1"},
		{name: "bytes", dec: decoder.JSONOf[[]byte](), in: `"aGk="`, want: []byte{'h', 'i'}},
		{name: "RawMessage", dec: decoder.JSONOf[json.RawMessage](), in: `{"k":1}`, want: json.RawMessage{'{', '"', 'k', '"', ':', '1', '}'}},
		{name: "UnmarshalJSON that keeps its input", dec: decoder.JSONOf[rawKeeper](), in: `[1,2]`, want: rawKeeper{raw: []byte("[1,2]")}},
		{name: "New", dec: decoder.JSON{New: func() any { return new(jsonItem) }}, in: `{"n":3}`, want: &jsonItem{N: 3}},
		{name: "New garbage", dec: decoder.JSON{New: func() any { return new(jsonItem) }}, in: "nope", msg: "decoder.JSON into *decoder_test.jsonItem: invalid character 'o' in literal null (expecting 'u')"},
		{name: "garbage", dec: item, in: "nope", msg: "decoder.JSONOf[decoder_test.jsonItem]: invalid character 'o' in literal null (expecting 'u')"},
		{name: "empty", dec: item, in: "", msg: "decoder.JSONOf[decoder_test.jsonItem]: unexpected end of JSON input"},
		{name: "truncated", dec: item, in: `{"name":`, msg: "unexpected end of JSON input"},
		{name: "trailing data", dec: item, in: `{"n":1} {"n":2}`, msg: "after top-level value"},
		{name: "wrong type", dec: item, in: `{"n":"x"}`, msg: "decoder.JSONOf[decoder_test.jsonItem]: json: cannot unmarshal string into Go struct field jsonItem.n of type int"},
		{name: "not a pointer", dec: decoder.JSON{New: func() any { return jsonItem{} }}, in: `{}`, msg: "json: Unmarshal(non-pointer decoder_test.jsonItem)"},
		{name: "nil New", dec: decoder.JSON{}, in: `{}`, msg: "dlqdump: decoder: cannot decode item: decoder.JSON.New is nil"},
		{name: "New returns nil", dec: decoder.JSON{New: func() any { return nil }}, in: `{}`, msg: "decoder.JSON.New returned nil"},
		{name: "New returns a nil pointer", dec: decoder.JSON{New: func() any { return (*jsonItem)(nil) }}, in: `{}`, msg: "decoder.JSON.New returned a nil *decoder_test.jsonItem"},
		{name: "strict", dec: strict, in: `{"name":"a","n":1}`, want: jsonItem{Name: "a", N: 1}},
		{name: "strict trailing whitespace", dec: strict, in: "{\"n\":1}\n\t ", want: jsonItem{N: 1}},
		{name: "strict unknown field", dec: strict, in: `{"name":"a","extra":true}`, msg: `decoder.JSONOf[decoder_test.jsonItem]: json: unknown field "extra"`},
		{name: "strict garbage", dec: strict, in: "nope", msg: "decoder.JSONOf[decoder_test.jsonItem]: invalid character 'o' in literal null (expecting 'u')"},
		{name: "strict empty", dec: strict, in: "", msg: "decoder.JSONOf[decoder_test.jsonItem]: unexpected EOF"},
		{name: "strict New", dec: decoder.JSON{New: func() any { return new(jsonItem) }, Strict: true}, in: `{"extra":1}`, msg: `decoder.JSON into *decoder_test.jsonItem: json: unknown field "extra"`},
		{name: "strict truncated", dec: strict, in: `{"name":`, msg: "unexpected EOF"},
		{name: "strict trailing value", dec: strict, in: `{"n":1} {"n":2}`, msg: "invalid data after the JSON value at offset"},
		{name: "strict trailing garbage", dec: strict, in: `{"n":1}}`, msg: "invalid character '}'"},
		{name: "strict wrong type", dec: strict, in: `{"n":"x"}`, msg: "cannot unmarshal string into Go struct field jsonItem.n of type int"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkDecode(t, c) })
	}
}

// The cause of a JSON error can be inspected through the wrapping.
func TestJSONErrorAs(t *testing.T) {
	_, err := decoder.JSONOf[jsonItem]().Decode([]byte("{oops"))
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("errors.As(%v, *json.SyntaxError) = false", err)
	}
	if se.Offset != 2 {
		t.Errorf("SyntaxError.Offset = %d, want 2", se.Offset)
	}
}

// Every Decode returns a value of its own: New is called each time, and a
// later Decode does not change an earlier item.
func TestFreshValues(t *testing.T) {
	cases := []struct {
		name     string
		dec      dlqdump.Decoder
		one, two string
		value    func(x any) string
	}{
		{
			name: "Proto", dec: decoder.Proto[wrapperspb.StringValue](),
			one: wire(t, wrapperspb.String("one")), two: wire(t, wrapperspb.String("two")),
			value: func(x any) string { return x.(*wrapperspb.StringValue).GetValue() },
		},
		{
			name: "JSONOf", dec: decoder.JSONOf[*jsonItem](),
			one: `{"name":"one"}`, two: `{"name":"two"}`,
			value: func(x any) string { return x.(*jsonItem).Name },
		},
		{
			name: "JSON", dec: decoder.JSON{New: func() any { return new(jsonItem) }},
			one: `{"name":"one"}`, two: `{"name":"two"}`,
			value: func(x any) string { return x.(*jsonItem).Name },
		},
	}
	for _, c := range cases {
		a, err := c.dec.Decode([]byte(c.one))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.dec.Decode([]byte(c.two))
		if err != nil {
			t.Fatal(err)
		}
		if a == b {
			t.Errorf("%s: two Decodes returned the same pointer", c.name)
		}
		if got := c.value(a); got != "one" {
			t.Errorf("%s: first item is %q after the second Decode, want \"one\"", c.name, got)
		}
		if got := c.value(b); got != "two" {
			t.Errorf("%s: second item is %q, want \"two\"", c.name, got)
		}
	}
}

// Round trips through each encoder and its inverse decoder, with the
// record bytes overwritten after Decode, as a reader reusing its buffer
// does (segment.Reader.Next, segment.StreamOptions.Reuse): every decoder but
// Fallthrough without Copy must give items that survive it.
func TestRoundTrip(t *testing.T) {
	type pair struct {
		name  string
		enc   dlqdump.Encoder
		dec   dlqdump.Decoder
		items []any
		want  func(x any) any // the item expected back; x itself when nil

		shares bool // the items are the record's bytes: compared before the overwrite
	}
	s, err := structpb.NewStruct(map[string]any{
		"queue": "orders", "attempt": 3.0, "ok": false,
		"nested": map[string]any{"list": []any{"a", 1.0, nil}},
	})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse("https://user@example.com:8443/p?q=1#f")
	if err != nil {
		t.Fatal(err)
	}
	tm := time.Date(2026, 11, 22, 10, 15, 0, 123456789, time.FixedZone("X", 3600))
	pairs := []pair{
		{
			name: "Builtin/Fallthrough", enc: encoder.Builtin{}, dec: decoder.Fallthrough{}, shares: true,
			items: []any{[]byte("bytes"), []byte{}, []byte{0, 1, 2, 0xff}, bytes.Repeat([]byte("z"), 1<<16)},
		},
		{
			name: "Builtin/Fallthrough Copy", enc: encoder.Builtin{}, dec: decoder.Fallthrough{Copy: true},
			items: []any{[]byte("bytes"), []byte{}, []byte{0, 1, 2, 0xff}, bytes.Repeat([]byte("z"), 1<<16)},
		},
		{
			name: "Builtin/Fallthrough AsString", enc: encoder.Builtin{}, dec: decoder.Fallthrough{AsString: true},
			items: []any{"string", "", "ünïcødé", strings.Repeat("y", 1<<16)},
		},
		{
			name: "Builtin/Fallthrough Stringer", enc: encoder.Builtin{}, dec: decoder.Fallthrough{AsString: true},
			items: []any{u},
			want:  func(x any) any { return x.(fmt.Stringer).String() },
		},
		{
			name: "Marshaller/Proto StringValue", enc: encoder.Marshaller{}, dec: decoder.Proto[wrapperspb.StringValue](),
			items: []any{wrapperspb.String("hi"), wrapperspb.String(""), wrapperspb.String(strings.Repeat("é", 1000))},
		},
		{
			name: "Marshaller/Proto BytesValue", enc: encoder.Marshaller{}, dec: decoder.Proto[wrapperspb.BytesValue](),
			items: []any{wrapperspb.Bytes([]byte{0, 1, 2}), wrapperspb.Bytes(bytes.Repeat([]byte{7}, 300))},
		},
		{
			name: "Marshaller/Unmarshaller Struct", enc: encoder.Marshaller{Deterministic: true}, dec: decoder.Unmarshaller{New: func() any { return new(structpb.Struct) }},
			items: []any{s, &structpb.Struct{}},
		},
		{
			name: "Marshaller/Unmarshaller Timestamp", enc: encoder.Marshaller{}, dec: decoder.Proto[timestamppb.Timestamp](),
			items: []any{timestamppb.New(tm), timestamppb.New(time.Unix(0, 0))},
		},
		{
			name: "Marshaller/Unmarshaller BinaryMarshaler", enc: encoder.Marshaller{}, dec: decoder.Unmarshaller{New: func() any { return new(binItem) }},
			items: []any{&binItem{b: []byte("payload")}, &binItem{b: []byte{}}},
		},
		{
			name: "Marshaller/Unmarshaller url.URL", enc: encoder.Marshaller{}, dec: decoder.Unmarshaller{New: func() any { return new(url.URL) }},
			items: []any{u},
		},
		{
			name: "Marshaller/Unmarshaller time.Time (BinaryAppender)", enc: encoder.Marshaller{}, dec: decoder.Unmarshaller{New: func() any { return new(time.Time) }},
			items: []any{tm.UTC()}, // the binary form keeps the offset, not the zone name
			want:  func(x any) any { t := x.(time.Time); return &t },
		},
		{
			name: "Marshaller/Unmarshaller netip.Addr", enc: encoder.Marshaller{}, dec: decoder.Unmarshaller{New: func() any { return new(netip.Addr) }},
			items: []any{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1%eth0")},
			want:  func(x any) any { a := x.(netip.Addr); return &a },
		},
		{
			name: "Marshaller/Unmarshaller gogo", enc: encoder.Marshaller{}, dec: decoder.Unmarshaller{New: func() any { return new(gogoItem) }},
			items: []any{&gogoItem{b: []byte("gogo")}},
		},
		{
			name: "JSON/JSONOf struct pointer", enc: encoder.JSON{}, dec: decoder.JSONOf[*jsonItem](),
			items: []any{&jsonItem{Name: "a", N: -1, Tags: []string{"x"}}, &jsonItem{}},
		},
		{
			name: "JSON/JSONOf struct value", enc: encoder.JSON{}, dec: decoder.JSONOf[jsonItem](),
			items: []any{jsonItem{Name: "<&>", N: 1 << 40}, jsonItem{}},
		},
		{
			name: "JSON/JSON New struct value", enc: encoder.JSON{}, dec: decoder.JSON{New: func() any { return new(jsonItem) }, Strict: true},
			items: []any{jsonItem{Name: "<&>", N: 1 << 40}},
			want:  func(x any) any { v := x.(jsonItem); return &v },
		},
		{
			name: "JSON/JSONOf map", enc: encoder.JSON{}, dec: decoder.JSONOf[map[string]any](),
			items: []any{map[string]any{"a": "b", "n": 1.5, "l": []any{true, nil, "x"}, "m": map[string]any{}}},
		},
		{
			name: "JSON/JSONOf string", enc: encoder.JSON{}, dec: decoder.JSONOf[string](),
			items: []any{"o-1", "", "ünïcødé"},
		},
	}
	for _, pr := range pairs {
		t.Run(pr.name, func(t *testing.T) {
			for _, x := range pr.items {
				p, err := pr.enc.Encode([]byte("header"), x)
				if err != nil {
					t.Fatalf("Encode(%T): %v", x, err)
				}
				p = p[len("header"):]
				got, err := pr.dec.Decode(p)
				if err != nil {
					t.Fatalf("Decode(Encode(%T)): %v", x, err)
				}
				want := x
				if pr.want != nil {
					want = pr.want(x)
				}
				if pr.shares && !equal(got, want) {
					t.Fatalf("round trip of %T: got %#v, want %#v", x, got, want)
				}
				if pr.shares {
					continue
				}
				clear(p)
				if !equal(got, want) {
					t.Fatalf("round trip of %T: got %#v, want %#v", x, got, want)
				}
			}
		})
	}
}

// Unknown protobuf fields are kept, not discarded: a message decoded into
// an older type encodes back to the same bytes.
func TestUnmarshallerKeepsUnknownFields(t *testing.T) {
	in, err := encoder.Marshaller{}.Encode(nil, wrapperspb.String("kept"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decoder.Proto[emptypb.Empty]().Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := encoder.Marshaller{}.Encode(nil, got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatalf("re-encoded %x, want %x: unknown fields were dropped", out, in)
	}
}

// A decoder value is safe for concurrent use (run with -race).
func TestConcurrentDecode(t *testing.T) {
	decs := []struct {
		dec dlqdump.Decoder
		in  []byte
	}{
		{decoder.Fallthrough{}, []byte("x")},
		{decoder.Proto[wrapperspb.StringValue](), []byte(wire(t, wrapperspb.String("x")))},
		{decoder.JSONOf[jsonItem](), []byte(`{"name":"x"}`)},
		{decoder.JSON{New: func() any { return new(jsonItem) }, Strict: true}, []byte(`{"name":"x"}`)},
	}
	var wg sync.WaitGroup
	for _, d := range decs {
		for range 4 {
			wg.Go(func() {
				for range 100 {
					if _, err := d.dec.Decode(d.in); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

type benchItem struct {
	ID      string            `json:"id"`
	Queue   string            `json:"queue"`
	Attempt int               `json:"attempt"`
	Error   string            `json:"error"`
	Payload string            `json:"payload"`
	Headers map[string]string `json:"headers"`
}

// item256 is a ~256-byte payload.
var item256 = bytes.Repeat([]byte("dead letter 0123456789abcdef\n"), 9)[:256]

func newBenchItem() benchItem {
	return benchItem{
		ID:      "0192f4c3-7b1e-7c3a-9d52-6a1f0e2b4c8d",
		Queue:   "orders.fulfilment",
		Attempt: 3,
		Error:   "destination refused: 503 Service Unavailable",
		Payload: "order=12345&sku=ABC-987&qty=2&warehouse=eu-west-1a&priority=high",
		Headers: map[string]string{"trace": "4bf92f3577b34da6a3ce929d0e0e4736", "source": "api"},
	}
}

func benchDecode(b *testing.B, enc dlqdump.Encoder, dec dlqdump.Decoder, x any) {
	b.Helper()
	p, err := enc.Encode(nil, x)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := dec.Decode(p); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := dec.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFallthrough(b *testing.B) {
	b.Run("bytes", func(b *testing.B) { benchDecode(b, encoder.Builtin{}, decoder.Fallthrough{}, item256) })
	b.Run("copy", func(b *testing.B) { benchDecode(b, encoder.Builtin{}, decoder.Fallthrough{Copy: true}, item256) })
	b.Run("string", func(b *testing.B) { benchDecode(b, encoder.Builtin{}, decoder.Fallthrough{AsString: true}, item256) })
}

func BenchmarkUnmarshaller(b *testing.B) {
	bi := newBenchItem()
	s, err := structpb.NewStruct(map[string]any{
		"id": bi.ID, "queue": bi.Queue, "attempt": float64(bi.Attempt),
		"error": bi.Error, "payload": bi.Payload,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("proto", func(b *testing.B) {
		benchDecode(b, encoder.Marshaller{}, decoder.Proto[wrapperspb.BytesValue](), wrapperspb.Bytes(item256))
	})
	b.Run("proto-struct", func(b *testing.B) {
		benchDecode(b, encoder.Marshaller{}, decoder.Proto[structpb.Struct](), s)
	})
	b.Run("BinaryUnmarshaler", func(b *testing.B) {
		benchDecode(b, encoder.Marshaller{}, decoder.Unmarshaller{New: func() any { return new(binItem) }}, &binItem{b: item256[:252]})
	})
	b.Run("gogo", func(b *testing.B) {
		benchDecode(b, encoder.Marshaller{}, decoder.Unmarshaller{New: func() any { return new(gogoItem) }}, &gogoItem{b: item256})
	})
}

func BenchmarkJSON(b *testing.B) {
	strict := decoder.JSONOf[benchItem]()
	strict.Strict = true
	b.Run("JSONOf", func(b *testing.B) { benchDecode(b, encoder.JSON{}, decoder.JSONOf[benchItem](), newBenchItem()) })
	b.Run("Strict", func(b *testing.B) { benchDecode(b, encoder.JSON{}, strict, newBenchItem()) })
}

package encoder_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/encoder"
)

// The encoders are dlqdump.Encoders.
var (
	_ dlqdump.Encoder = encoder.Builtin{}
	_ dlqdump.Encoder = encoder.Marshaller{}
	_ dlqdump.Encoder = encoder.JSON{}
)

var errBoom = errors.New("boom")

// byter is a Byter and not a []byte: a named slice type is not matched by
// the []byte case.
type byter []byte

func (b byter) Bytes() []byte { return b }

// byterStringer has both methods: Bytes is preferred.
type byterStringer struct{}

func (byterStringer) Bytes() []byte  { return []byte("bytes") }
func (byterStringer) String() string { return "string" }

type stringer struct{ s string }

func (s stringer) String() string { return "<" + s.s + ">" }

// nilSafe handles a nil receiver: Builtin must call it and use the result.
type nilSafe struct{ s string }

func (n *nilSafe) String() string {
	if n == nil {
		return "nil-safe"
	}
	return n.s
}

// panicker panics with a non-nil receiver: that is the method's own bug and
// Builtin must not hide it.
type panicker struct{}

func (panicker) String() string { panic("panicker.String") }

type myString string

// ptrByter has a pointer receiver that dereferences it.
type ptrByter struct{ b []byte }

func (p *ptrByter) Bytes() []byte { return p.b }

// appender has both AppendBinary and MarshalBinary: AppendBinary is
// preferred.
type appender struct {
	b   []byte
	err error
}

func (a appender) AppendBinary(dst []byte) ([]byte, error) {
	if a.err != nil {
		return append(dst, "garbage"...), a.err
	}
	return append(dst, a.b...), nil
}

func (a appender) MarshalBinary() ([]byte, error) { return []byte("MarshalBinary"), nil }

type marshaler struct {
	b   []byte
	err error
}

func (m marshaler) MarshalBinary() ([]byte, error) { return m.b, m.err }

// ptrMarshaler has a pointer receiver that dereferences it.
type ptrMarshaler struct{ b []byte }

func (m *ptrMarshaler) MarshalBinary() ([]byte, error) { return m.b, nil }

// gogoMsg is a gogo/protobuf-style message: Size and MarshalTo.
type gogoMsg struct {
	b     []byte
	size  int // what Size reports; len(b) when 0
	wrote int // what MarshalTo reports; bytes copied when 0
	err   error
}

func (g *gogoMsg) Size() int {
	if g.size != 0 {
		return g.size
	}
	return len(g.b)
}

func (g *gogoMsg) MarshalTo(dst []byte) (int, error) {
	n := copy(dst, g.b)
	if g.err != nil {
		return 0, g.err
	}
	if g.wrote != 0 {
		return g.wrote, nil
	}
	return n, nil
}

type failingJSON struct{}

func (failingJSON) MarshalJSON() ([]byte, error) { return nil, errBoom }

type encodeCase struct {
	name string
	x    any
	want string // the bytes appended, when no error
	// on error:
	unsupported bool   // the error wraps ErrUnsupported
	cause       error  // the error wraps cause, if not nil
	msg         string // the error message contains msg
}

// checkEncode runs c against enc with a nil dst and with a non-empty dst,
// both with and without spare capacity, and checks that the prefix is kept.
func checkEncode(t *testing.T, enc dlqdump.Encoder, c encodeCase) {
	t.Helper()
	const prefix = "prefix:"
	dsts := map[string]func() []byte{
		"nil":            func() []byte { return nil },
		"prefix":         func() []byte { return []byte(prefix) },
		"prefix+cap":     func() []byte { return append(make([]byte, 0, 1024), prefix...) },
		"prefix+garbage": func() []byte { return append([]byte(prefix), "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"...)[:len(prefix)] },
	}
	for dname, mk := range dsts {
		dst := mk()
		pre := string(dst)
		got, err := enc.Encode(dst, c.x)
		wantErr := c.unsupported || c.cause != nil || c.msg != ""
		if wantErr {
			if err == nil {
				t.Fatalf("%s: Encode(%T) = %q, nil error; want an error", dname, c.x, got)
			}
			if c.unsupported != errors.Is(err, encoder.ErrUnsupported) {
				t.Errorf("%s: errors.Is(%v, ErrUnsupported) = %v, want %v", dname, err, !c.unsupported, c.unsupported)
			}
			if c.cause != nil && !errors.Is(err, c.cause) {
				t.Errorf("%s: error %v does not wrap %v", dname, err, c.cause)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: error %q does not contain %q", dname, err, c.msg)
			}
			if !strings.HasPrefix(err.Error(), "dlqdump: encoder") {
				t.Errorf("%s: error %q does not start with \"dlqdump: encoder\"", dname, err)
			}
			if string(got) != pre {
				t.Errorf("%s: on error Encode returned %q, want dst %q unchanged", dname, got, pre)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Encode(%T): %v", dname, c.x, err)
		}
		if string(got) != pre+c.want {
			t.Errorf("%s: Encode(%T) = %q, want %q", dname, c.x, got, pre+c.want)
		}
		if string(dst) != pre {
			t.Errorf("%s: Encode clobbered dst: %q, want %q", dname, dst, pre)
		}
	}
}

func TestBuiltin(t *testing.T) {
	b := []byte("bytes")
	s := "str"
	var nilBytes *[]byte
	var nilString *string
	var nilURL *url.URL
	var nilNilSafe *nilSafe
	cases := []encodeCase{
		{name: "bytes", x: []byte("hello"), want: "hello"},
		{name: "empty bytes", x: []byte{}, want: ""},
		{name: "nil bytes", x: []byte(nil), want: ""},
		{name: "binary bytes", x: []byte{0, 1, 0xff}, want: "\x00\x01\xff"},
		{name: "*[]byte", x: &b, want: "bytes"},
		{name: "nil *[]byte", x: nilBytes, unsupported: true, msg: "encoder.Builtin cannot encode a nil *[]uint8"},
		{name: "string", x: "hello", want: "hello"},
		{name: "empty string", x: "", want: ""},
		{name: "*string", x: &s, want: "str"},
		{name: "nil *string", x: nilString, unsupported: true, msg: "encoder.Builtin cannot encode a nil *string"},
		{name: "Byter", x: byter("by"), want: "by"},
		{name: "Byter pointer", x: &ptrByter{b: []byte("pb")}, want: "pb"},
		{name: "nil Byter that panics", x: (*ptrByter)(nil), unsupported: true, msg: "encoder.Builtin cannot encode a nil *encoder_test.ptrByter: runtime error: invalid memory address or nil pointer dereference"},
		{name: "Byter before Stringer", x: byterStringer{}, want: "bytes"},
		{name: "Stringer", x: stringer{"s"}, want: "<s>"},
		{name: "Stringer pointer", x: &url.URL{Scheme: "https", Host: "example.com"}, want: "https://example.com"},
		{name: "nil Stringer that panics", x: nilURL, unsupported: true, msg: "encoder.Builtin cannot encode a nil *url.URL"},
		{name: "nil Stringer that handles nil", x: nilNilSafe, want: "nil-safe"},
		{name: "int", x: 42, unsupported: true, msg: "encoder.Builtin cannot encode int"},
		{name: "struct", x: struct{ A int }{1}, unsupported: true, msg: "encoder.Builtin cannot encode struct { A int }"},
		{name: "named string", x: myString("x"), unsupported: true, msg: "cannot encode encoder_test.myString"},
		{name: "[]string", x: []string{"a"}, unsupported: true, msg: "cannot encode []string"},
		{name: "nil", x: nil, unsupported: true, msg: "encoder.Builtin cannot encode <nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkEncode(t, encoder.Builtin{}, c) })
	}
}

// A panic in a method of a non-nil item is not swallowed.
func TestPanicNotHidden(t *testing.T) {
	for _, enc := range []dlqdump.Encoder{encoder.Builtin{}, encoder.Marshaller{}} {
		t.Run(fmt.Sprintf("%T", enc), func(t *testing.T) {
			var x any = panicker{}
			if _, ok := enc.(encoder.Marshaller); ok {
				x = &gogoPanicker{}
			}
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("Encode did not re-raise the panic of a non-nil item's method")
				}
			}()
			_, err := enc.Encode(nil, x)
			t.Fatalf("Encode returned (err %v) instead of panicking", err)
		})
	}
}

type gogoPanicker struct{}

func (*gogoPanicker) Size() int                     { return 1 }
func (*gogoPanicker) MarshalTo([]byte) (int, error) { panic("gogoPanicker.MarshalTo") }

func TestMarshaller(t *testing.T) {
	sv := wrapperspb.String("hello")
	svWire, err := proto.Marshal(sv)
	if err != nil {
		t.Fatal(err)
	}
	ts := timestamppb.New(time.Unix(1_700_000_000, 123))
	tsWire, err := proto.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	var nilSV *wrapperspb.StringValue
	var nilPtrMarshaler *ptrMarshaler
	var nilGogo *gogoMsg
	cases := []encodeCase{
		{name: "proto StringValue", x: sv, want: string(svWire)},
		{name: "proto Timestamp", x: ts, want: string(tsWire)},
		{name: "proto empty", x: &wrapperspb.StringValue{}, want: ""},
		{name: "proto nil", x: nilSV, want: ""},
		{name: "BinaryAppender", x: appender{b: []byte("app")}, want: "app"},
		{name: "BinaryAppender error", x: appender{err: errBoom}, cause: errBoom, msg: "AppendBinary encoder_test.appender: boom"},
		{name: "BinaryMarshaler", x: marshaler{b: []byte("mar")}, want: "mar"},
		{name: "BinaryMarshaler empty", x: marshaler{}, want: ""},
		{name: "BinaryMarshaler error", x: marshaler{err: errBoom}, cause: errBoom, msg: "MarshalBinary encoder_test.marshaler: boom"},
		{name: "BinaryMarshaler pointer", x: &ptrMarshaler{b: []byte("ptr")}, want: "ptr"},
		{name: "BinaryMarshaler nil pointer", x: nilPtrMarshaler, unsupported: true, msg: "encoder.Marshaller cannot encode a nil *encoder_test.ptrMarshaler"},
		{name: "gogo", x: &gogoMsg{b: []byte("gogo")}, want: "gogo"},
		{name: "gogo empty", x: &gogoMsg{}, want: ""},
		{name: "gogo writes less than Size", x: &gogoMsg{b: []byte("gogo"), size: 10}, want: "gogo"},
		{name: "gogo error", x: &gogoMsg{b: []byte("gogo"), err: errBoom}, cause: errBoom, msg: "MarshalTo *encoder_test.gogoMsg: boom"},
		{name: "gogo negative Size", x: &gogoMsg{size: -1}, msg: "*encoder_test.gogoMsg.Size() = -1"},
		{name: "gogo reports more than Size", x: &gogoMsg{b: []byte("ab"), wrote: 5}, msg: "MarshalTo wrote 5 bytes, Size() = 2"},
		{name: "gogo reports negative", x: &gogoMsg{b: []byte("ab"), wrote: -1}, msg: "MarshalTo wrote -1 bytes, Size() = 2"},
		{name: "gogo nil", x: nilGogo, unsupported: true, msg: "encoder.Marshaller cannot encode a nil *encoder_test.gogoMsg"},
		{name: "string", x: "s", unsupported: true, msg: "encoder.Marshaller cannot encode string"},
		{name: "[]byte", x: []byte("b"), unsupported: true, msg: "encoder.Marshaller cannot encode []uint8"},
		{name: "proto value, not pointer", x: struct{ A int }{}, unsupported: true, msg: "encoder.Marshaller cannot encode struct { A int }"},
		{name: "nil", x: nil, unsupported: true, msg: "encoder.Marshaller cannot encode <nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkEncode(t, encoder.Marshaller{}, c) })
	}
}

// Deterministic orders map fields: repeated encodings of a message with a
// map are byte-identical and equal proto's deterministic encoding.
func TestMarshallerDeterministic(t *testing.T) {
	m := map[string]any{}
	for i := range 50 {
		m[fmt.Sprintf("key%02d", i)] = float64(i)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		got, err := encoder.Marshaller{Deterministic: true}.Encode([]byte("p"), s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[1:], want) || got[0] != 'p' {
			t.Fatalf("Deterministic encoding differs from proto's deterministic encoding")
		}
	}
	// Without Deterministic the bytes still decode to the same message.
	got, err := encoder.Marshaller{}.Encode(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	back := &structpb.Struct{}
	if err := proto.Unmarshal(got, back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, s) {
		t.Fatalf("round trip changed the message")
	}
}

type jsonItem struct {
	Name string   `json:"name"`
	N    int      `json:"n"`
	Tags []string `json:"tags,omitempty"`
}

func TestJSON(t *testing.T) {
	cases := []encodeCase{
		{name: "struct", x: jsonItem{Name: "a", N: 1}, want: `{"name":"a","n":1}`},
		{name: "struct pointer", x: &jsonItem{Name: "b", Tags: []string{"x"}}, want: `{"name":"b","n":0,"tags":["x"]}`},
		{name: "map sorted", x: map[string]int{"b": 2, "a": 1}, want: `{"a":1,"b":2}`},
		{name: "string", x: "s<>", want: `"s\u003c\u003e"`},
		{name: "bytes", x: []byte("hi"), want: `"aGk="`},
		{name: "nil", x: nil, want: "null"},
		{name: "nil pointer", x: (*jsonItem)(nil), want: "null"},
		{name: "chan", x: make(chan int), unsupported: true, msg: "encoder.JSON cannot encode chan int"},
		{name: "func", x: func() {}, unsupported: true, msg: "encoder.JSON cannot encode func()"},
		{name: "field of unsupported type", x: struct{ C chan int }{}, unsupported: true, msg: "encoder.JSON cannot encode struct { C chan int }: json: unsupported type: chan int"},
		{name: "complex", x: complex(1, 2), unsupported: true, msg: "cannot encode complex128"},
		{name: "NaN is a bad value, not a bad type", x: math.NaN(), msg: "dlqdump: encoder.JSON: marshal float64: json: unsupported value: NaN"},
		{name: "failing MarshalJSON", x: failingJSON{}, cause: errBoom, msg: "dlqdump: encoder.JSON: marshal encoder_test.failingJSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkEncode(t, encoder.JSON{}, c) })
	}
}

// item256 is a ~256-byte payload.
var item256 = bytes.Repeat([]byte("dead letter 0123456789abcdef\n"), 9)[:256]

type benchItem struct {
	ID      string            `json:"id"`
	Queue   string            `json:"queue"`
	Attempt int               `json:"attempt"`
	Error   string            `json:"error"`
	Payload string            `json:"payload"`
	Headers map[string]string `json:"headers"`
}

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

func benchEncode(b *testing.B, enc dlqdump.Encoder, x any) {
	b.Helper()
	out, err := enc.Encode(nil, x)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		// The Queue reuses its buffer: append to a truncated dst.
		out, err = enc.Encode(out[:0], x)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuiltin(b *testing.B) {
	s := string(item256)
	b.Run("bytes", func(b *testing.B) { benchEncode(b, encoder.Builtin{}, item256) })
	b.Run("string", func(b *testing.B) { benchEncode(b, encoder.Builtin{}, s) })
	b.Run("Byter", func(b *testing.B) { benchEncode(b, encoder.Builtin{}, byter(item256)) })
}

func BenchmarkMarshaller(b *testing.B) {
	bi := newBenchItem()
	s, err := structpb.NewStruct(map[string]any{
		"id": bi.ID, "queue": bi.Queue, "attempt": float64(bi.Attempt),
		"error": bi.Error, "payload": bi.Payload,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("proto", func(b *testing.B) { benchEncode(b, encoder.Marshaller{}, wrapperspb.Bytes(item256)) })
	b.Run("proto-struct", func(b *testing.B) { benchEncode(b, encoder.Marshaller{}, s) })
	b.Run("BinaryMarshaler", func(b *testing.B) { benchEncode(b, encoder.Marshaller{}, marshaler{b: item256}) })
	b.Run("BinaryAppender", func(b *testing.B) { benchEncode(b, encoder.Marshaller{}, appender{b: item256}) })
	b.Run("gogo", func(b *testing.B) { benchEncode(b, encoder.Marshaller{}, &gogoMsg{b: item256}) })
}

func BenchmarkJSON(b *testing.B) {
	benchEncode(b, encoder.JSON{}, newBenchItem())
}

func ExampleBuiltin() {
	var enc encoder.Builtin
	dst, _ := enc.Encode(nil, "hello, ")
	dst, _ = enc.Encode(dst, []byte("dead letter"))
	fmt.Printf("%s\n", dst)
	_, err := enc.Encode(dst, 42)
	fmt.Println(errors.Is(err, encoder.ErrUnsupported), err)
	// Output:
	// hello, dead letter
	// true dlqdump: encoder: unsupported item type: encoder.Builtin cannot encode int
}

func ExampleMarshaller() {
	var enc encoder.Marshaller
	dst, err := enc.Encode(nil, wrapperspb.String("hi"))
	fmt.Printf("%x %v\n", dst, err)
	_, err = enc.Encode(nil, "not a message")
	fmt.Println(err)
	// Output:
	// 0a026869 <nil>
	// dlqdump: encoder: unsupported item type: encoder.Marshaller cannot encode string
}

func ExampleJSON() {
	var enc encoder.JSON
	dst, _ := enc.Encode(nil, map[string]int{"b": 2, "a": 1})
	fmt.Printf("%s\n", dst)
	_, err := enc.Encode(nil, make(chan int))
	fmt.Println(errors.Is(err, encoder.ErrUnsupported))
	// Output:
	// {"a":1,"b":2}
	// true
}

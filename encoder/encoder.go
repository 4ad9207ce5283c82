// Package encoder holds ready-made dlqdump.Encoder implementations: Builtin
// for strings and byte slices, Marshaller for protobuf messages and
// encoding.BinaryMarshaler, JSON for anything encoding/json takes.
//
// Every encoder appends to dst (Encode(dst []byte, x any) ([]byte, error)) so
// the Queue can reuse its buffers, and reports an item it cannot encode with
// an error wrapping ErrUnsupported that names the item's type.
package encoder

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"
)

// ErrUnsupported means the encoder cannot encode an item of that type.
var ErrUnsupported = errors.New("dlqdump: encoder: unsupported item type")

func unsupported(enc string, x any) error {
	return fmt.Errorf("%w: %s cannot encode %T", ErrUnsupported, enc, x)
}

// nilItem is the error for a nil *[]byte or *string.
func nilItem(enc string, x any) error {
	return fmt.Errorf("%w: %s cannot encode a nil %T", ErrUnsupported, enc, x)
}

// isNilPointer reports whether x is a nil pointer.
func isNilPointer(x any) bool {
	v := reflect.ValueOf(x)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// encodeNil calls encode for an item that is a nil pointer and turns a
// panic (its method dereferenced the nil receiver) into an error, as fmt
// does, so that a nil item fails Enqueue instead of crashing the caller. A
// method that handles a nil receiver is still called and its result used.
// Items that are not nil pointers skip this (and its defer): a panic in
// their methods is the method's own and is not hidden.
func encodeNil(enc string, dst []byte, x any, encode func([]byte, any) ([]byte, error)) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, fmt.Errorf("%w: %s cannot encode a nil %T: %v", ErrUnsupported, enc, x, r)
		}
	}()
	return encode(dst, x)
}

// Byter is implemented by items that are their bytes.
type Byter interface {
	Bytes() []byte
}

// Builtin encodes []byte, *[]byte, string, *string, Byter and fmt.Stringer
// items as their bytes, in that order of preference. It is the Queue's
// default Encoder. A nil *[]byte or *string, and a nil pointer whose Bytes
// or String method panics, is an error wrapping ErrUnsupported.
type Builtin struct{}

// Encode appends the bytes of x to dst.
func (Builtin) Encode(dst []byte, x any) ([]byte, error) {
	switch v := x.(type) {
	case []byte:
		return append(dst, v...), nil
	case string:
		return append(dst, v...), nil
	case *[]byte:
		if v == nil {
			return dst, nilItem("encoder.Builtin", x)
		}
		return append(dst, *v...), nil
	case *string:
		if v == nil {
			return dst, nilItem("encoder.Builtin", x)
		}
		return append(dst, *v...), nil
	case Byter:
		if isNilPointer(x) {
			return encodeNil("encoder.Builtin", dst, x, builtinMethod)
		}
		return append(dst, v.Bytes()...), nil
	case fmt.Stringer:
		if isNilPointer(x) {
			return encodeNil("encoder.Builtin", dst, x, builtinMethod)
		}
		return append(dst, v.String()...), nil
	}
	return dst, unsupported("encoder.Builtin", x)
}

// builtinMethod appends the result of x's Bytes or String method.
func builtinMethod(dst []byte, x any) ([]byte, error) {
	switch v := x.(type) {
	case Byter:
		return append(dst, v.Bytes()...), nil
	case fmt.Stringer:
		return append(dst, v.String()...), nil
	}
	return dst, unsupported("encoder.Builtin", x)
}

// Marshaller encodes protobuf messages (google.golang.org/protobuf
// proto.Message) in their wire format, items with an AppendBinary or
// MarshalBinary method (encoding.BinaryAppender, encoding.BinaryMarshaler),
// and gogo-style messages with MarshalTo and Size, in that order. A nil
// pointer whose method panics is an error wrapping ErrUnsupported; a nil
// protobuf message encodes as an empty message.
type Marshaller struct {
	// Deterministic makes protobuf map fields encode in a stable order.
	Deterministic bool
}

// marshalerTo is the gogo/protobuf style of in-place marshalling.
type marshalerTo interface {
	Size() int
	MarshalTo(dst []byte) (int, error)
}

// Encode appends the encoding of x to dst.
func (m Marshaller) Encode(dst []byte, x any) ([]byte, error) {
	if isNilPointer(x) {
		return encodeNil("encoder.Marshaller", dst, x, m.encode)
	}
	return m.encode(dst, x)
}

// encode is Encode without the guard for nil pointers.
func (m Marshaller) encode(dst []byte, x any) ([]byte, error) {
	switch v := x.(type) {
	case proto.Message:
		out, err := proto.MarshalOptions{Deterministic: m.Deterministic}.MarshalAppend(dst, v)
		if err != nil {
			return dst, fmt.Errorf("dlqdump: encoder.Marshaller: marshal %T: %w", x, err)
		}
		return out, nil
	case encoding.BinaryAppender:
		out, err := v.AppendBinary(dst)
		if err != nil {
			return dst, fmt.Errorf("dlqdump: encoder.Marshaller: AppendBinary %T: %w", x, err)
		}
		return out, nil
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return dst, fmt.Errorf("dlqdump: encoder.Marshaller: MarshalBinary %T: %w", x, err)
		}
		return append(dst, b...), nil
	case marshalerTo:
		n := v.Size()
		if n < 0 {
			return dst, fmt.Errorf("dlqdump: encoder.Marshaller: %T.Size() = %d", x, n)
		}
		start := len(dst)
		dst = append(dst, make([]byte, n)...)
		w, err := v.MarshalTo(dst[start:])
		if err != nil {
			return dst[:start], fmt.Errorf("dlqdump: encoder.Marshaller: MarshalTo %T: %w", x, err)
		}
		if w < 0 || w > n {
			return dst[:start], fmt.Errorf("dlqdump: encoder.Marshaller: %T.MarshalTo wrote %d bytes, Size() = %d", x, w, n)
		}
		return dst[:start+w], nil
	}
	return dst, unsupported("encoder.Marshaller", x)
}

// JSON encodes any item encoding/json can marshal.
type JSON struct{}

// Encode appends the JSON encoding of x to dst.
func (JSON) Encode(dst []byte, x any) ([]byte, error) {
	b, err := json.Marshal(x)
	if err != nil {
		var ute *json.UnsupportedTypeError
		if errors.As(err, &ute) {
			return dst, fmt.Errorf("%w: encoder.JSON cannot encode %T: %v", ErrUnsupported, x, err)
		}
		return dst, fmt.Errorf("dlqdump: encoder.JSON: marshal %T: %w", x, err)
	}
	return append(dst, b...), nil
}

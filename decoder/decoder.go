// Package decoder holds ready-made dlqdump.Decoder implementations, each the
// inverse of an encoder in the encoder package: Fallthrough for Builtin
// (the bytes as they are), Unmarshaller for Marshaller (protobuf messages,
// encoding.BinaryUnmarshaler and gogo-style Unmarshal), JSONOf (and JSON)
// for JSON.
//
// What comes back: JSONOf[T] gives back T, Proto[T] a *T (the protobuf
// message dumped); Fallthrough gives the bytes encoder.Builtin stored, as a
// []byte, or as a string with AsString: a record does not say whether a
// string or a []byte (or a Byter, or a Stringer) was dumped, so the
// decoder's configuration decides.
//
// Memory: Fallthrough, by default, returns the record's bytes themselves as
// the item, without a copy, so restoring costs no allocation and no copy per
// record; the item then shares the memory of the block it was read from (see
// Fallthrough for what that keeps alive). Every other decoder here, and
// Fallthrough with Copy or AsString, returns an item that shares no memory
// with the record, copying p before handing it to a method that might keep
// it, so the caller may reuse p after Decode.
//
// A record that cannot be decoded is an error wrapping ErrDecode that names
// the decoder and the type it decodes into.
package decoder

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"google.golang.org/protobuf/proto"
)

// ErrDecode means the decoder could not turn a record back into an item:
// the bytes are not a valid encoding for the type, or the decoder is
// misconfigured.
var ErrDecode = errors.New("dlqdump: decoder: cannot decode item")

// Fallthrough returns the record's bytes as the item: the inverse of
// encoder.Builtin. The item is a []byte (never nil, empty for an empty
// record), or a string when AsString is set.
//
// By default the item is p itself, capped at its length: no copy, no
// allocation but the interface value's. It shares the memory of the block
// the record was decoded from, which the Restorer (reading through a
// segment.Stream without Reuse, or Reader.ReadBlock) gives to no other
// block, so the item stays valid and unchanged for as long as it is
// referenced, and appending to it copies it instead of writing over the
// next record. But an item that is kept pins its whole block: one block of
// raw records, the dumping Queue's BlockSize (256 KiB by default, at most
// about 64 MiB; segment.Block.Mem tells exactly), stays in memory as long as
// any one of its items does. A destination that handles items and drops
// them, as a queue that processes them does, costs nothing more; one that
// keeps a few items for long (a cache, a retry list, a sample) keeps a
// block per item: use Copy, or copy the items it keeps. Do not write into
// the item's bytes: until the Restorer is done with the record, they are
// also what it would quarantine if the destination refused the item.
//
// With Copy (or AsString) the item is a copy of p (a string is one), which
// keeps nothing else alive; p may then be reused after Decode.
type Fallthrough struct {
	// AsString makes the item a string (a copy) instead of a []byte.
	AsString bool
	// Copy makes the []byte item a copy of the record's bytes instead of
	// the bytes themselves, for destinations that keep items for long.
	Copy bool
}

// Decode returns p (capped at its length), or a copy of it with Copy, or a
// string copy of it with AsString.
func (d Fallthrough) Decode(p []byte) (any, error) {
	switch {
	case d.AsString:
		return string(p), nil
	case d.Copy:
		return append(make([]byte, 0, len(p)), p...), nil // no zeroing before the copy
	case p == nil:
		return []byte{}, nil
	}
	return p[:len(p):len(p)], nil
}

// unmarshaler is the gogo/protobuf style of unmarshalling.
type unmarshaler interface {
	Unmarshal(p []byte) error
}

// Unmarshaller decodes into the value New returns: the inverse of
// encoder.Marshaller. The value is tried as a protobuf message
// (google.golang.org/protobuf proto.Message), an encoding.BinaryUnmarshaler
// and a gogo-style message with Unmarshal([]byte) error, in that order, and
// is the item once filled. The two latter get a copy of the record, so they
// may keep it.
type Unmarshaller struct {
	// New returns a fresh value to decode into, a non-nil pointer such as
	// new(pb.Event), on every call: the items must not share it. Required.
	New func() any
}

// Decode fills the value New returns from p and returns it.
func (u Unmarshaller) Decode(p []byte) (any, error) {
	x, err := newTarget("Unmarshaller", u.New)
	if err != nil {
		return nil, err
	}
	switch v := x.(type) {
	case proto.Message:
		if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(p, v); err != nil {
			return nil, fmt.Errorf("%w: decoder.Unmarshaller into %T: %w", ErrDecode, x, err)
		}
	case encoding.BinaryUnmarshaler:
		if err := v.UnmarshalBinary(bytes.Clone(p)); err != nil {
			return nil, fmt.Errorf("%w: decoder.Unmarshaller: %T.UnmarshalBinary: %w", ErrDecode, x, err)
		}
	case unmarshaler:
		if err := v.Unmarshal(bytes.Clone(p)); err != nil {
			return nil, fmt.Errorf("%w: decoder.Unmarshaller: %T.Unmarshal: %w", ErrDecode, x, err)
		}
	default:
		return nil, fmt.Errorf("%w: decoder.Unmarshaller cannot decode into %T: not a proto.Message, encoding.BinaryUnmarshaler or Unmarshal([]byte) error", ErrDecode, x)
	}
	return x, nil
}

// Proto returns an Unmarshaller whose items are *T protobuf messages, e.g.
// decoder.Proto[pb.Event]().
func Proto[T any, P interface {
	*T
	proto.Message
}]() Unmarshaller {
	return Unmarshaller{New: func() any { return P(new(T)) }}
}

// JSON decodes with encoding/json into the value New returns: the inverse
// of encoder.JSON. The value, a non-nil pointer, is the item once filled:
// the item is that pointer, whatever type was dumped. To get back the type
// that was dumped, use JSONOf.
// A record holding anything after the JSON value is an error.
type JSON struct {
	// New returns a fresh pointer to decode into, such as new(Event), on
	// every call: the items must not share it. Required.
	New func() any
	// Strict makes an object key that matches no struct field an error
	// (json.Decoder.DisallowUnknownFields) instead of being ignored.
	Strict bool
}

// JSONOf returns a decoder whose items are of type T, the type of the items
// that were dumped with encoder.JSON: JSONOf[Event]() gives back Event
// values, JSONOf[*Event]() *Event pointers, so that a worker's x.(T) holds
// for restored items as for new ones.
func JSONOf[T any]() TypedJSON[T] {
	return TypedJSON[T]{}
}

// TypedJSON decodes with encoding/json into a T and returns the T: the
// inverse of encoder.JSON for items of type T (see JSONOf). A record
// holding anything after the JSON value is an error.
type TypedJSON[T any] struct {
	// Strict makes an object key that matches no struct field an error
	// (json.Decoder.DisallowUnknownFields) instead of being ignored.
	Strict bool
}

// Decode returns the T encoded as JSON in p.
func (d TypedJSON[T]) Decode(p []byte) (any, error) {
	var v T
	var err error
	if d.Strict {
		err = decodeStrict(p, &v)
	} else {
		// json.Unmarshal copies what it keeps, and an UnmarshalJSON method
		// is handed a copy: p may be reused after Decode.
		err = json.Unmarshal(bytes.Clone(p), &v)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: decoder.JSONOf[%s]: %w", ErrDecode, reflect.TypeFor[T](), err)
	}
	return v, nil
}

// Decode fills the value New returns from the JSON in p and returns it.
func (d JSON) Decode(p []byte) (any, error) {
	x, err := newTarget("JSON", d.New)
	if err != nil {
		return nil, err
	}
	if d.Strict {
		err = decodeStrict(p, x)
	} else {
		// json.Unmarshal copies what it keeps, and an UnmarshalJSON method
		// is handed a copy: p may be reused after Decode.
		err = json.Unmarshal(bytes.Clone(p), x)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: decoder.JSON into %T: %w", ErrDecode, x, err)
	}
	return x, nil
}

// decodeStrict is json.Unmarshal with unknown fields disallowed.
func decodeStrict(p []byte, x any) error {
	// json.Decoder copies p into its own buffer.
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(x); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return err
		}
		return fmt.Errorf("invalid data after the JSON value at offset %d", dec.InputOffset())
	}
	return nil
}

// newTarget calls the New field of the decoder named dec and checks that
// it returned a non-nil value, and not a nil pointer.
func newTarget(dec string, fn func() any) (any, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: decoder.%s.New is nil", ErrDecode, dec)
	}
	x := fn()
	if x == nil {
		return nil, fmt.Errorf("%w: decoder.%s.New returned nil", ErrDecode, dec)
	}
	if v := reflect.ValueOf(x); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: decoder.%s.New returned a nil %T", ErrDecode, dec, x)
	}
	return x, nil
}

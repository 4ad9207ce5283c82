package decoder_test

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/encoder"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func ExampleFallthrough() {
	p := []byte("dead letter")
	x, _ := decoder.Fallthrough{}.Decode(p)               // p itself: shares its memory
	c, _ := decoder.Fallthrough{Copy: true}.Decode(p)     // a copy
	s, _ := decoder.Fallthrough{AsString: true}.Decode(p) // a copy too
	copy(p, "reused buff")                                // what a reader reusing its buffer would do
	fmt.Printf("%T %s\n", x, x)
	fmt.Printf("%T %s\n", c, c)
	fmt.Printf("%T %s\n", s, s)
	// Output:
	// []uint8 reused buff
	// []uint8 dead letter
	// string dead letter
}

func ExampleUnmarshaller() {
	dec := decoder.Unmarshaller{New: func() any { return new(wrapperspb.StringValue) }}
	p, _ := encoder.Marshaller{}.Encode(nil, wrapperspb.String("order 42"))
	x, err := dec.Decode(p)
	fmt.Println(x.(*wrapperspb.StringValue).GetValue(), err)
	_, err = dec.Decode([]byte{0xff, 0xff})
	fmt.Println(errors.Is(err, decoder.ErrDecode))
	// protobuf-go varies the space in its own messages: print up to them.
	msg, _, _ := strings.Cut(err.Error(), ": proto:")
	fmt.Println(msg)
	// Output:
	// order 42 <nil>
	// true
	// dlqdump: decoder: cannot decode item: decoder.Unmarshaller into *wrapperspb.StringValue
}

func ExampleProto() {
	dec := decoder.Proto[timestamppb.Timestamp]()
	p, _ := encoder.Marshaller{}.Encode(nil, timestamppb.New(time.Unix(1_700_000_000, 0)))
	x, _ := dec.Decode(p)
	fmt.Println(x.(*timestamppb.Timestamp).AsTime().Format(time.RFC3339))
	// Output:
	// 2023-11-14T22:13:20Z
}

func ExampleJSONOf() {
	type Event struct {
		ID   int    `json:"id"`
		Kind string `json:"kind"`
	}
	// Items dumped as Event come back as Event; dumped as *Event, use
	// decoder.JSONOf[*Event]().
	dec := decoder.JSONOf[Event]()
	x, err := dec.Decode([]byte(`{"id":7,"kind":"refund","extra":1}`))
	fmt.Printf("%T %+v %v\n", x, x.(Event), err)
	p, _ := decoder.JSONOf[*Event]().Decode([]byte(`{"id":8}`))
	fmt.Printf("%T %+v\n", p, *p.(*Event))

	dec.Strict = true
	_, err = dec.Decode([]byte(`{"id":7,"kind":"refund","extra":1}`))
	fmt.Println(err)
	// Output:
	// decoder_test.Event {ID:7 Kind:refund} <nil>
	// *decoder_test.Event {ID:8 Kind:}
	// dlqdump: decoder: cannot decode item: decoder.JSONOf[decoder_test.Event]: json: unknown field "extra"
}

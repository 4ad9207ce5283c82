package brokers

import (
	"encoding"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/dlqdump/dlqdump"
)

// Message returns the Watermill message of what a Restorer delivers: a
// *dlqdump.Envelope (Config.DeliverEnvelope), a dlqdump.HeaderCarrier or a
// bare item. The payload is the item itself when it is []byte or string,
// else what its MarshalBinary returns (decoder.Fallthrough, the CLI's
// decoder, gives []byte). The metadata are the record's headers, every one
// of them (reason, source, replays, record-id, traceparent, ...), under
// their own keys.
//
// The message's UUID is the record's ID, headers[dlqdump.HeaderRecordID]:
// the same every time the record is delivered. An item delivered without
// that header (a bare item: a Restorer without DeliverEnvelope) gets a new
// random UUID each time, which no broker can deduplicate by: configure
// DeliverEnvelope.
func Message(x any) (*message.Message, error) {
	item := x
	var h dlqdump.Headers
	switch v := x.(type) {
	case *dlqdump.Envelope:
		if v == nil {
			return nil, fmt.Errorf("dlqdump: brokers: a nil *Envelope is no message")
		}
		item, h = v.Item, v.Headers
	case dlqdump.Envelope:
		item, h = v.Item, v.Headers
	case dlqdump.HeaderCarrier:
		h = v.DLQHeaders()
	}
	payload, err := payloadOf(item)
	if err != nil {
		return nil, err
	}
	id := h[dlqdump.HeaderRecordID]
	if id == "" {
		id = watermill.NewUUID()
	}
	msg := message.NewMessage(id, payload)
	for k, v := range h {
		msg.Metadata.Set(k, v)
	}
	return msg, nil
}

// payloadOf returns the bytes of an item.
func payloadOf(item any) ([]byte, error) {
	switch v := item.(type) {
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("dlqdump: brokers: marshal %T: %w", item, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("dlqdump: brokers: cannot publish an item of type %T: want []byte, string or an encoding.BinaryMarshaler (decoder.Fallthrough gives []byte)", item)
}

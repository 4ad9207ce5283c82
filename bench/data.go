package main

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/bench/pb"
	"github.com/dlqdump/dlqdump/encoder"
	"github.com/dlqdump/dlqdump/gen"
)

// poolBytes is about how many payload bytes of distinct items each data set
// generates; the items are cycled through. It is many times a block (256 KiB),
// so compression sees no repetition within a block or a zstd window, and small
// enough not to dominate the peak RSS.
const poolBytes = 8 << 20

// dataSetNames lists the data sets in order of payload size.
var dataSetNames = []string{"small", "proto", "typical", "large"}

var dataSetDesc = map[string]string{
	"small":   "~64 B JSON events (id, type, time)",
	"typical": "~256 B JSON dead letters (ids, names, amounts, line items, error, note)",
	"proto":   "the typical events as typed protobuf messages (bench/pb/deadletter.proto: strings, varints, a Timestamp, nested and repeated messages), enqueued as messages and marshalled by encoder.Marshaller",
	"large":   "16 KiB JSON dead letters (many line items, long note)",
}

// dataSet is a pool of distinct items, deterministic for its name.
type dataSet struct {
	name string
	raw  [][]byte         // the stored bytes of each item
	msgs []*pb.DeadLetter // proto: the messages raw was marshalled from
	mean int              // mean len(raw)
}

func newDataSet(name string) (*dataSet, error) {
	g := gen.New(1)
	d := &dataSet{name: name}
	switch name {
	case "small":
		d.raw = g.Events(poolBytes/64, 64)
	case "typical":
		d.raw = g.Events(poolBytes/256, 256)
	case "large":
		d.raw = g.Events(poolBytes/(16<<10), 16<<10)
	case "proto":
		// The typical JSON events as typed messages of ~135 bytes.
		events := g.Events(poolBytes/135, 256)
		d.msgs = make([]*pb.DeadLetter, len(events))
		d.raw = make([][]byte, len(events))
		for i, e := range events {
			m, err := deadLetter(e)
			if err != nil {
				return nil, err
			}
			d.msgs[i] = m
			if d.raw[i], err = proto.Marshal(m); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown data set %q (want small, typical, proto or large)", name)
	}
	var total int
	for _, r := range d.raw {
		total += len(r)
	}
	d.mean = total / len(d.raw)
	return d, nil
}

// item returns the i-th item as given to Queue.Enqueue: the bytes, or the
// protobuf message, which the Queue's Encoder marshals.
func (d *dataSet) item(i int) any {
	i %= len(d.raw)
	if d.msgs != nil {
		return d.msgs[i]
	}
	return d.raw[i]
}

// bytes returns the i-th item's bytes, as a byte-oriented queue takes them:
// protobuf messages are marshalled (into scratch) by the caller, as a
// producer must.
func (d *dataSet) bytes(i int, scratch *[]byte) ([]byte, error) {
	i %= len(d.raw)
	if d.msgs == nil {
		return d.raw[i], nil
	}
	b, err := proto.MarshalOptions{}.MarshalAppend((*scratch)[:0], d.msgs[i])
	*scratch = b
	return b, err
}

// size returns the stored size of the i-th item.
func (d *dataSet) size(i int) int { return len(d.raw[i%len(d.raw)]) }

// payload returns the bytes of items 0..n-1.
func (d *dataSet) payload(n int) int64 {
	var per int64
	for _, r := range d.raw {
		per += int64(len(r))
	}
	full := int64(n / len(d.raw))
	total := full * per
	for i := range n % len(d.raw) {
		total += int64(len(d.raw[i]))
	}
	return total
}

// encoder returns the Queue's Encoder for the data set.
func (d *dataSet) encoder() dlqdump.Encoder {
	if d.msgs != nil {
		return encoder.Marshaller{}
	}
	return encoder.Builtin{}
}

// items returns how many items a run of at most maxItems items and maxBytes
// payload bytes dumps.
func (d *dataSet) items(maxItems int, maxBytes int64) int {
	return max(1, min(maxItems, int(maxBytes/int64(d.mean))))
}

// jsonEvent is the shape of the generator's events.
type jsonEvent struct {
	ID   string    `json:"id"`
	TS   time.Time `json:"ts"`
	Type string    `json:"type"`
	User struct {
		ID    int64  `json:"id"`
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"user"`
	Amount struct {
		Value    float64 `json:"value"`
		Currency string  `json:"currency"`
	} `json:"amount"`
	Attempt int32  `json:"attempt"`
	Error   string `json:"error"`
	Items   []struct {
		SKU string `json:"sku"`
		Qty int32  `json:"qty"`
	} `json:"items"`
	Note string `json:"note"`
}

// deadLetter converts a generated JSON event into the protobuf message.
func deadLetter(event []byte) (*pb.DeadLetter, error) {
	var e jsonEvent
	if err := json.Unmarshal(event, &e); err != nil {
		return nil, err
	}
	cents := int64(math.Round(e.Amount.Value * 100))
	m := &pb.DeadLetter{
		Id:      e.ID,
		Ts:      timestamppb.New(e.TS),
		Type:    e.Type,
		User:    &pb.User{Id: e.User.ID, Name: e.User.Name, Email: e.User.Email},
		Amount:  &pb.Money{Currency: e.Amount.Currency, Units: cents / 100, Nanos: int32(cents%100) * 10_000_000},
		Attempt: e.Attempt,
		Error:   e.Error,
		Note:    e.Note,
	}
	for _, it := range e.Items {
		m.Items = append(m.Items, &pb.LineItem{Sku: it.SKU, Qty: it.Qty})
	}
	return m, nil
}

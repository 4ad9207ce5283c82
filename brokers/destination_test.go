package brokers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
)

func TestMessageOfAnEnvelope(t *testing.T) {
	env := &dlqdump.Envelope{Item: []byte(`{"id":1}`), Headers: dlqdump.Headers{
		dlqdump.HeaderReason: "failed", dlqdump.HeaderRecordID: "0123456789abcdef01234567-42", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}}
	msg, err := brokers.Message(env)
	if err != nil {
		t.Fatal(err)
	}
	if msg.UUID != "0123456789abcdef01234567-42" {
		t.Errorf("UUID %q, want the record's ID", msg.UUID)
	}
	if string(msg.Payload) != `{"id":1}` {
		t.Errorf("payload %q", msg.Payload)
	}
	for k, v := range env.Headers {
		if got := msg.Metadata.Get(k); got != v {
			t.Errorf("metadata %s = %q, want %q", k, got, v)
		}
	}
	if len(msg.Metadata) != len(env.Headers) {
		t.Errorf("metadata %v, want the headers %v", msg.Metadata, env.Headers)
	}
}

// carrier is an item that carries its own headers.
type carrier struct {
	body string
	h    dlqdump.Headers
}

func (c *carrier) DLQHeaders() dlqdump.Headers     { return c.h }
func (c *carrier) SetDLQHeaders(h dlqdump.Headers) { c.h = h }
func (c *carrier) MarshalBinary() ([]byte, error)  { return []byte(c.body), nil }

func TestMessageOfOtherItems(t *testing.T) {
	c := &carrier{body: "carried", h: dlqdump.Headers{dlqdump.HeaderRecordID: "id-1", "k": "v"}}
	msg, err := brokers.Message(c)
	if err != nil || msg.UUID != "id-1" || string(msg.Payload) != "carried" || msg.Metadata.Get("k") != "v" {
		t.Fatalf("HeaderCarrier: %v %+v", err, msg)
	}
	// Without an ID, each message gets a random UUID of its own.
	a, err1 := brokers.Message("bare")
	b, err2 := brokers.Message(dlqdump.Envelope{Item: "bare"})
	if err1 != nil || err2 != nil || a.UUID == "" || a.UUID == b.UUID || string(a.Payload) != "bare" {
		t.Fatalf("bare items: %v %v %q %q", err1, err2, a.UUID, b.UUID)
	}
	// An item that cannot be a payload is refused, not unavailable.
	_, err = brokers.Message(&dlqdump.Envelope{Item: 42})
	if err == nil || errors.Is(err, dlqdump.ErrUnavailable) {
		t.Fatalf("an int payload: %v", err)
	}
	d := brokers.New(&failing{}, "t", nil)
	if err := d.Enqueue(&dlqdump.Envelope{Item: 42}); err == nil || errors.Is(err, dlqdump.ErrUnavailable) {
		t.Fatalf("Enqueue of an int payload: %v; want a refusal", err)
	}
}

// failing is a Publisher whose Publish returns err.
type failing struct {
	err    error
	calls  int
	closed bool
}

func (f *failing) Publish(string, ...*message.Message) error { f.calls++; return f.err }
func (f *failing) Close() error                              { f.closed = true; return nil }

func TestEnqueueTellsUnavailableFromRefused(t *testing.T) {
	tooLarge := errors.New("too large")
	down := errors.New("connection refused")
	refused := func(err error) bool { return errors.Is(err, tooLarge) }
	for _, c := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"delivered", nil, false},
		{"down", down, true},
		{"wrapped", fmt.Errorf("sending message failed: %w", down), true},
		{"refused", fmt.Errorf("publish: %w", tooLarge), false},
		{"already unavailable", fmt.Errorf("%w: x", dlqdump.ErrUnavailable), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pub := &failing{err: c.err}
			d := brokers.New(pub, "orders", &brokers.Options{Refused: refused, Name: "nats://host/orders"})
			err := d.Enqueue(&dlqdump.Envelope{Item: []byte("x")})
			if (err == nil) != (c.err == nil) {
				t.Fatalf("Enqueue: %v, Publish said %v", err, c.err)
			}
			if errors.Is(err, dlqdump.ErrUnavailable) != c.unavailable {
				t.Fatalf("Enqueue: %v; unavailable %v, want %v", err, !c.unavailable, c.unavailable)
			}
			if c.err != nil && !errors.Is(err, c.err) {
				t.Fatalf("Enqueue: %v does not wrap %v", err, c.err)
			}
			if err := d.Close(); err != nil || !pub.closed {
				t.Fatalf("Close: %v, publisher closed %v", err, pub.closed)
			}
			if err := d.Enqueue(&dlqdump.Envelope{Item: []byte("x")}); !errors.Is(err, dlqdump.ErrClosed) || pub.calls != 1 {
				t.Fatalf("Enqueue after Close: %v, %d publishes", err, pub.calls)
			}
			if err := d.Close(); !errors.Is(err, dlqdump.ErrClosed) {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

// A Restorer delivers into any Publisher: Watermill's in-process GoChannel
// here. Every record arrives once, with its headers as metadata.
func TestRestoreIntoGoChannel(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	if err := brokertest.Dump(dir, n, 4*dlqdump.Kilobyte, dlqdump.Headers{dlqdump.HeaderSource: "orders"}); err != nil {
		t.Fatal(err)
	}
	ch := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: n}, watermill.NopLogger{})
	msgs, err := ch.Subscribe(context.Background(), "redrive")
	if err != nil {
		t.Fatal(err)
	}
	d := brokers.New(ch, "redrive", nil)
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{},
		Queue: d, DeliverEnvelope: true, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil || rep.Delivered != n {
		t.Fatalf("Run: %v, delivered %d of %d: %+v", err, rep.Delivered, n, rep)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	for range n {
		m := <-msgs
		m.Ack()
		mu.Lock()
		seen[string(m.Payload)]++
		mu.Unlock()
		if m.Metadata.Get(dlqdump.HeaderSource) != "orders" || m.Metadata.Get(dlqdump.HeaderReason) != "failed" || m.Metadata.Get(dlqdump.HeaderReplays) != "1" {
			t.Fatalf("metadata %v", m.Metadata)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records received, want %d", len(seen), n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

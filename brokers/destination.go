// Package brokers delivers restored dead letters to message brokers through
// Watermill (github.com/ThreeDotsLabs/watermill): a Destination publishes
// each record a dlqdump.Restorer hands it with any message.Publisher, and
// its subpackages nats (NATS JetStream) and kafka open one from a URL.
//
// It is a module of its own, github.com/dlqdump/dlqdump/brokers, so that
// Watermill, the brokers' clients and the servers its tests run stay out of
// the dlqdump library's go.mod.
//
// A Destination says what its two answers mean. A delivery is the
// publisher's acknowledgement: Publish returned nil (a JetStream PubAck, a
// Kafka produce response with acks from all in-sync replicas). A failure is
// the broker being unavailable unless Options.Refused says the broker
// refused that message for what it is (too large, say): an unavailable
// broker's error wraps dlqdump.ErrUnavailable, so the Restorer backs off
// and retries it and, still failing after Config.MaxAttempts, stops the
// pass at that record, which stays ready with every record after it;
// nothing is quarantined because a broker was down. A refusal is quarantined
// after its attempts, as for any destination.
//
// Each record becomes a message whose UUID is the record's stable ID
// (dlqdump.HeaderRecordID, the same when a crash makes the Restorer deliver
// it again), whose payload is the record's and whose metadata are the
// record's headers. A broker that deduplicates by message ID (JetStream's
// Nats-Msg-Id within its stream's duplicate window) therefore keeps one copy
// of a record a crash delivered twice.
package brokers

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/dlqdump/dlqdump"
)

// ErrClosed is returned by Enqueue after Close.
var ErrClosed = fmt.Errorf("%w: the broker destination was closed", dlqdump.ErrClosed)

// Options configure a Destination. The zero value is valid.
type Options struct {
	// Refused reports whether an error Publish returned is the broker
	// refusing that message for good (too large, a header it does not
	// take), so that the Restorer quarantines the record once its attempts
	// are spent. Any other error is the broker being unavailable (down,
	// unreachable, timing out, without a stream or topic for the subject):
	// it wraps dlqdump.ErrUnavailable and never makes a record quarantined.
	// The subpackages set it for their broker. Default: nil, no error is a
	// refusal.
	Refused func(error) bool
	// Name is how errors name the destination, e.g. the URL it was opened
	// with. Default: "topic TOPIC".
	Name string
}

// Destination publishes restored records with a Watermill Publisher, one
// message per record, on one topic. Its Enqueue is a Restorer's destination
// (Config.Queue or one of Config.Destinations); configure the Restorer with
// DeliverEnvelope so that records arrive with their headers and ID (see
// Message). It is safe for concurrent use (Config.Concurrency above 1) as
// far as the Publisher is: Watermill's NATS and Kafka publishers are.
type Destination struct {
	pub     message.Publisher
	topic   string
	refused func(error) bool
	name    string

	mu     sync.RWMutex
	closed bool
}

// New returns a Destination publishing on topic with pub. Close closes pub.
func New(pub message.Publisher, topic string, o *Options) *Destination {
	if o == nil {
		o = &Options{}
	}
	d := &Destination{pub: pub, topic: topic, refused: o.Refused, name: o.Name}
	if d.name == "" {
		d.name = "topic " + topic
	}
	return d
}

// Enqueue publishes x as one message (see Message) and returns once the
// publisher acknowledged it. An x that cannot be made a message is refused
// (the Restorer quarantines it); a publish error wraps
// dlqdump.ErrUnavailable unless Options.Refused says it is a refusal.
func (d *Destination) Enqueue(x any) error {
	msg, err := Message(x)
	if err != nil {
		return err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	err = d.pub.Publish(d.topic, msg)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dlqdump.ErrUnavailable):
		return err
	case d.refused != nil && d.refused(err):
		return fmt.Errorf("publish to %s: refused: %w", d.name, err)
	}
	return fmt.Errorf("%w: publish to %s: %w", dlqdump.ErrUnavailable, d.name, err)
}

// Close closes the publisher once publishes in flight returned; later
// Enqueues return ErrClosed. A second Close returns ErrClosed.
func (d *Destination) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.closed = true
	return d.pub.Close()
}

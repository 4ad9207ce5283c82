// Package kafkadest restores dead letters into Apache Kafka through
// Watermill's Kafka publisher (github.com/ThreeDotsLabs/watermill-kafka/v3,
// over IBM's Sarama). Importing it registers the URL scheme kafka with
// package github.com/dlqdump/dlqdump/destination:
//
//	kafka://HOST:PORT[,HOST:PORT...]/TOPIC
//
// Each record is produced to TOPIC by an idempotent producer with acks from
// all in-sync replicas (acks=all); the produce response is the delivery. The
// payload is the Kafka record's value, the record's headers its Kafka
// headers (under their own names, so traceparent is W3C's), and its ID
// (dlqdump.HeaderRecordID) the header _watermill_message_uuid as well.
// Kafka does not deduplicate across producers: a record a crash of the
// restorer delivers twice is in the topic twice, with the same ID, for the
// consumer to deduplicate by.
//
// A broker that is down, unreachable or times out, a topic that does not
// exist (topics are never created by a restore) and a partition without a
// leader are the destination being unavailable (dlqdump.ErrUnavailable: the
// Restorer backs off and stops, nothing is quarantined); a record larger
// than the producer's or the topic's limit is refused: the Restorer
// quarantines it.
package kafkadest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/dlqdump/dlqdump/brokers"
	"github.com/dlqdump/dlqdump/destination"
)

// Form is the form of the URLs this package opens.
const Form = "kafka://HOST:PORT[,HOST:PORT...]/TOPIC"

func init() {
	destination.Register(destination.Scheme{Name: "kafka", Form: Form, Open: open})
}

func open(_ context.Context, u *url.URL, o *destination.Options) (destination.Destination, error) {
	return Open(u.String(), o)
}

// Open returns a destination producing to the topic of rawURL
// (kafka://HOST:PORT[,HOST:PORT...]/TOPIC). It does not wait for the
// brokers: the producer is made at the first delivery, and while it cannot
// be, Enqueue returns an error wrapping dlqdump.ErrUnavailable.
func Open(rawURL string, o *destination.Options) (*brokers.Destination, error) {
	addrs, topic, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg := SaramaConfig(o.TimeoutOrDefault())
	pub := brokers.Lazy(func() (message.Publisher, error) {
		return wmkafka.NewPublisher(wmkafka.PublisherConfig{
			Brokers:               addrs,
			Marshaler:             wmkafka.DefaultMarshaler{},
			OverwriteSaramaConfig: cfg,
		}, watermill.NopLogger{})
	})
	return brokers.New(pub, topic, &brokers.Options{Refused: Refused, Name: rawURL}), nil
}

// SaramaConfig returns the producer configuration Open uses: an idempotent
// producer (Kafka 0.11 and later) waiting for all in-sync replicas, a
// network and produce timeout of timeout, a few quick retries (the
// Restorer retries with its own back-off after them), and no topic created
// by asking for it.
func SaramaConfig(timeout time.Duration) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "dlqdump"
	c.Version = sarama.V2_1_0_0
	c.Net.DialTimeout, c.Net.ReadTimeout, c.Net.WriteTimeout = timeout, timeout, timeout
	c.Net.MaxOpenRequests = 1 // an idempotent producer's requirement
	c.Metadata.AllowAutoTopicCreation = false
	c.Metadata.Retry.Max = 1
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Timeout = timeout
	c.Producer.Retry.Max = 1
	c.Producer.Retry.Backoff = 100 * time.Millisecond
	return c
}

// ParseURL returns the brokers' addresses and the topic of a destination
// URL; an error names what is wrong.
func ParseURL(rawURL string) (addrs []string, topic string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("dlqdump: kafka destination: %w (want %s)", err, Form)
	}
	bad := func(what string) error {
		return fmt.Errorf("dlqdump: kafka destination %q: %s (want %s)", rawURL, what, Form)
	}
	switch {
	case u.Scheme != "kafka":
		return nil, "", bad("the scheme is not kafka")
	case u.Host == "":
		return nil, "", bad("no HOST:PORT")
	case u.User != nil:
		return nil, "", bad("credentials in the URL are not taken")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, "", bad("a query or fragment is not taken")
	}
	for _, a := range strings.Split(u.Host, ",") {
		i := strings.LastIndexByte(a, ':')
		if i <= 0 || i == len(a)-1 {
			return nil, "", bad(fmt.Sprintf("broker %q is not HOST:PORT", a))
		}
		addrs = append(addrs, a)
	}
	topic = strings.TrimPrefix(u.Path, "/")
	if topic == "" {
		return nil, "", bad("no TOPIC")
	}
	if len(topic) > 249 || strings.IndexFunc(topic, notTopicChar) >= 0 || topic == "." || topic == ".." {
		return nil, "", bad(fmt.Sprintf("topic %q: a topic name is 1 to 249 of the letters, digits, '.', '_' and '-'", topic))
	}
	return addrs, topic, nil
}

// Refused reports whether err, from a produce, is the producer or the
// broker refusing that record for what it is: larger than the producer's
// MaxMessageBytes or the topic's max.message.bytes, or an invalid record.
// Every other error is the destination being unavailable.
func Refused(err error) bool {
	// Sarama's own check of a message's size is a ConfigurationError
	// naming the setting (a producer that cannot be made is one too, but
	// its message names no MaxMessageBytes).
	var ce sarama.ConfigurationError
	if errors.As(err, &ce) && strings.Contains(string(ce), "MaxMessageBytes") {
		return true
	}
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) ||
		errors.Is(err, sarama.ErrMessageTooLarge) ||
		errors.Is(err, sarama.ErrInvalidRecord)
}

// notTopicChar reports whether c may not be in a topic name.
func notTopicChar(c rune) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')
}

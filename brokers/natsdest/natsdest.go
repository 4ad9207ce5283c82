// Package natsdest restores dead letters into NATS JetStream through
// Watermill's NATS publisher (github.com/ThreeDotsLabs/watermill-nats/v2).
// Importing it registers the URL scheme nats with package
// github.com/dlqdump/dlqdump/destination:
//
//	nats://[USER:PASSWORD@]HOST:PORT/SUBJECT
//
// Each record is published on SUBJECT with a JetStream publish, whose
// PubAck (the stream stored it) is the delivery. The payload is the
// message's data, the record's headers its NATS headers (under their own
// names, so traceparent is W3C's), and its ID (dlqdump.HeaderRecordID) both
// the header _watermill_message_uuid and Nats-Msg-Id: the stream keeps one
// copy of a record delivered twice within its duplicate window (two
// minutes by default), e.g. again after a crash of the restorer.
//
// A stream must capture SUBJECT: without one, as while the server is down,
// unreachable or times out, a publish is the destination being unavailable
// (dlqdump.ErrUnavailable: the Restorer backs off and stops, nothing is
// quarantined). A message larger than the server's max_payload or the
// stream's max_msg_size is refused: the Restorer quarantines that record.
// Core NATS without JetStream has no acknowledgement, so it is no
// destination here.
package natsdest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/nats-io/nats.go"

	"github.com/dlqdump/dlqdump/brokers"
	"github.com/dlqdump/dlqdump/destination"
)

// Form is the form of the URLs this package opens.
const Form = "nats://HOST:PORT/SUBJECT"

func init() {
	destination.Register(destination.Scheme{Name: "nats", Form: Form, Open: open})
}

func open(_ context.Context, u *url.URL, o *destination.Options) (destination.Destination, error) {
	return Open(u.String(), o)
}

// Open returns a destination publishing on the subject of rawURL
// (nats://HOST:PORT/SUBJECT). It does not wait for the server: while it
// cannot be reached, Enqueue returns an error wrapping
// dlqdump.ErrUnavailable, and the connection is retried in the
// background.
func Open(rawURL string, o *destination.Options) (*brokers.Destination, error) {
	server, subject, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	timeout := o.TimeoutOrDefault()
	nc, err := nats.Connect(server,
		nats.Name("dlqdump"),
		nats.Timeout(timeout),
		// Not connected yet or any more: publish nothing into a
		// buffer that is sent on reconnection (after Enqueue said the
		// record was not delivered); fail at once instead, and keep
		// reconnecting for the Restorer's next attempt.
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectBufSize(-1),
	)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: nats destination %s: %w", redact(rawURL), err)
	}
	pub, err := wmnats.NewPublisherWithNatsConn(nc, wmnats.PublisherPublishConfig{
		Marshaler:         &wmnats.NATSMarshaler{},
		SubjectCalculator: wmnats.DefaultSubjectCalculator,
		JetStream: wmnats.JetStreamConfig{
			TrackMsgId:     true,
			ConnectOptions: []nats.JSOpt{nats.MaxWait(timeout)},
			PublishOptions: []nats.PubOpt{nats.AckWait(timeout)},
		},
	}, watermill.NopLogger{})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("dlqdump: nats destination %s: %w", redact(rawURL), err)
	}
	return brokers.New(pub, subject, &brokers.Options{Refused: Refused, Name: redact(rawURL)}), nil
}

// ParseURL returns the server URL (nats://[USER:PASSWORD@]HOST:PORT) and
// the subject of a destination URL; an error names what is wrong.
func ParseURL(rawURL string) (server, subject string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("dlqdump: nats destination: %w (want %s)", err, Form)
	}
	bad := func(what string) error {
		return fmt.Errorf("dlqdump: nats destination %q: %s (want %s)", redact(rawURL), what, Form)
	}
	switch {
	case u.Scheme != "nats":
		return "", "", bad("the scheme is not nats")
	case u.Host == "":
		return "", "", bad("no HOST:PORT")
	case u.RawQuery != "" || u.Fragment != "":
		return "", "", bad("a query or fragment is not taken")
	}
	subject = strings.TrimPrefix(u.Path, "/")
	switch {
	case subject == "":
		return "", "", bad("no SUBJECT")
	case strings.ContainsAny(subject, " \t\r\n/"):
		return "", "", bad(fmt.Sprintf("subject %q has a space or a slash", subject))
	case strings.ContainsAny(subject, "*>"):
		return "", "", bad(fmt.Sprintf("subject %q has a wildcard: a record is published on one subject", subject))
	case strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") || strings.Contains(subject, ".."):
		return "", "", bad(fmt.Sprintf("subject %q has an empty token", subject))
	}
	s := &url.URL{Scheme: "nats", User: u.User, Host: u.Host}
	return s.String(), subject, nil
}

// Refused reports whether err, from a JetStream publish, is the server
// refusing that message for what it is: larger than its max_payload or
// than the stream's max_msg_size, or headers too large. Every other error
// is the destination being unavailable.
func Refused(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var api *nats.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case 10054, // JSStreamMessageExceedsMaximumErr: message size exceeds maximum allowed
			10097: // JSStreamHeaderExceedsMaximumErr: header size exceeds maximum allowed
			return true
		}
	}
	return false
}

// redact returns rawURL without its password.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

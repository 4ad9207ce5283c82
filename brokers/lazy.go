package brokers

import (
	"errors"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Lazy returns a Publisher that makes its publisher with open at its first
// Publish, and again at the next Publish after open failed. A client that
// cannot be made while its broker is down (Sarama's producer, say) so
// makes a destination that opens at once and says the broker is
// unavailable when it is asked to deliver, rather than an error at start.
// open's error is Publish's.
func Lazy(open func() (message.Publisher, error)) message.Publisher {
	return &lazy{open: open}
}

type lazy struct {
	open func() (message.Publisher, error)

	mu     sync.Mutex
	pub    message.Publisher
	closed bool
}

func (l *lazy) get() (message.Publisher, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.pub == nil {
		p, err := l.open()
		if err != nil {
			return nil, err
		}
		l.pub = p
	}
	return l.pub, nil
}

// Publish publishes with the publisher, made first if need be.
func (l *lazy) Publish(topic string, msgs ...*message.Message) error {
	p, err := l.get()
	if err != nil {
		return err
	}
	return p.Publish(topic, msgs...)
}

// Close closes the publisher if it was made.
func (l *lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("dlqdump: brokers: publisher closed twice")
	}
	l.closed = true
	if l.pub == nil {
		return nil
	}
	return l.pub.Close()
}

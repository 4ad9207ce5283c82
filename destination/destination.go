// Package destination opens a Restorer's destination from a URL, as
// database/sql opens a driver's database: the package implementing a URL
// scheme registers an Opener for it in its init function, and a program
// that wants the scheme imports that package, often for its side effect
// alone:
//
//	import _ "github.com/dlqdump/dlqdump/brokers/natsdest" // nats://HOST:PORT/SUBJECT
//
//	d, err := destination.Open(ctx, "nats://127.0.0.1:4222/orders.redrive", nil)
//	...
//	defer d.Close()
//	r, err := dlqdump.NewRestorer(&dlqdump.Config{..., Queue: d, DeliverEnvelope: true})
//
// The dlqdump command opens the --to URLs of restore and job run through
// it, so a build of the command that imports more schemes (the brokers
// module builds one with nats:// and kafka://) restores into them without
// any other change. This package itself registers nothing and depends on
// nothing outside the standard library.
package destination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrUnknownScheme means no Opener is registered for a URL's scheme.
var ErrUnknownScheme = errors.New("dlqdump: no destination registered for this URL scheme")

// Destination is what an Opener returns: a Restorer's destination
// (Config.Queue, Config.Destinations) that holds connections to close.
// Its Enqueue returns nil once the record is delivered (acknowledged by
// the destination), an error wrapping dlqdump.ErrUnavailable while the
// destination cannot take anything, or another error when it refuses
// that record.
type Destination interface {
	Enqueue(x any) error
	Close() error
}

// Options are what every Opener takes. The zero value, or nil, is valid.
type Options struct {
	// Timeout bounds one delivery attempt: a publish and the broker's
	// acknowledgement, or a request and its answer. Default: 30s.
	Timeout time.Duration
	// Logger receives the destination's warnings. Default: none.
	Logger *slog.Logger
}

// TimeoutOrDefault returns o.Timeout, or its default when o is nil or the
// Timeout is not above 0.
func (o *Options) TimeoutOrDefault() time.Duration {
	if o == nil || o.Timeout <= 0 {
		return 30 * time.Second
	}
	return o.Timeout
}

// LoggerOrDiscard returns o.Logger, or a logger that discards when o is
// nil or has none.
func (o *Options) LoggerOrDiscard() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// Opener opens the destination of a URL of its scheme. It checks the
// URL's form at once (an error names what is wrong and shows the form it
// wants); it should not fail because the destination is down at that
// moment: its Enqueue says so, wrapping dlqdump.ErrUnavailable, so that a
// restore into a broker that is not up yet stops with nothing quarantined.
type Opener func(ctx context.Context, u *url.URL, o *Options) (Destination, error)

// Scheme describes a registered scheme.
type Scheme struct {
	// Name is the URL scheme, e.g. "nats".
	Name string
	// Form is the URL's form for messages and --help, e.g.
	// "nats://HOST:PORT/SUBJECT".
	Form string
	// Open opens a destination.
	Open Opener
}

var (
	mu      sync.RWMutex
	schemes = map[string]Scheme{}
)

// Register makes s.Open the opener of URLs of scheme s.Name. It panics when
// the scheme is registered already or s is incomplete, as sql.Register does:
// both are programming errors.
func Register(s Scheme) {
	if s.Name == "" || s.Open == nil {
		panic("destination: Register needs a scheme name and an opener")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := schemes[s.Name]; dup {
		panic("destination: Register called twice for scheme " + s.Name)
	}
	schemes[s.Name] = s
}

// Lookup returns the registered scheme of that name.
func Lookup(name string) (Scheme, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := schemes[name]
	return s, ok
}

// Schemes returns the registered schemes, sorted by name.
func Schemes() []Scheme {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Scheme, 0, len(schemes))
	for _, s := range schemes {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Scheme) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Open opens the destination of rawURL with the opener registered for its
// scheme. An error wraps ErrUnknownScheme when there is none, and names the
// schemes there are.
func Open(ctx context.Context, rawURL string, o *Options) (Destination, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: destination %q: %w", rawURL, err)
	}
	s, ok := Lookup(u.Scheme)
	if !ok {
		var names []string
		for _, s := range Schemes() {
			names = append(names, s.Form)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: %q (none is registered)", ErrUnknownScheme, rawURL)
		}
		return nil, fmt.Errorf("%w: %q (registered: %v)", ErrUnknownScheme, rawURL, names)
	}
	return s.Open(ctx, u, o)
}

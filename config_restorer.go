package dlqdump

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/koykov/queue"
	"go.opentelemetry.io/otel/trace"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// restorerConfig is a validated copy of the Restorer's fields.
type restorerConfig struct {
	Config
	rater    interface{ Rate() float32 }
	tracer   trace.Tracer         // from TracerProvider; nil: no spans
	keys     segment.KeyUnwrapper // from Encryption.Identities
	maxBlock int                  // the largest raw block read
}

func (c *Config) restorerConfig() (*restorerConfig, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Config", ErrConfig)
	}
	r := &restorerConfig{Config: *c}
	switch {
	case c.Reader == nil:
		return nil, fmt.Errorf("%w: Reader: required (e.g. &fs.Reader{Directory: dir})", ErrConfig)
	case c.Decoder == nil:
		return nil, fmt.Errorf("%w: Decoder: required (e.g. decoder.Fallthrough{})", ErrConfig)
	case c.Queue == nil:
		return nil, fmt.Errorf("%w: Queue: required, the destination of restored items", ErrConfig)
	case c.CheckInterval < 0:
		return nil, fmt.Errorf("%w: CheckInterval: %s is negative", ErrConfig, c.CheckInterval)
	case c.PostponeInterval < 0:
		return nil, fmt.Errorf("%w: PostponeInterval: %s is negative", ErrConfig, c.PostponeInterval)
	case c.AllowRate < 0 || c.AllowRate > 1:
		return nil, fmt.Errorf("%w: AllowRate: %v is outside 0..1", ErrConfig, c.AllowRate)
	case c.RateLimit < 0:
		return nil, fmt.Errorf("%w: RateLimit: %v is negative", ErrConfig, c.RateLimit)
	case c.RetryBase < 0 || c.RetryMax < 0 || c.RetryMax > 0 && c.RetryBase > c.RetryMax:
		return nil, fmt.Errorf("%w: RetryBase/RetryMax: %s/%s: want 0 <= RetryBase <= RetryMax", ErrConfig, c.RetryBase, c.RetryMax)
	case c.MaxAttempts < 0:
		return nil, fmt.Errorf("%w: MaxAttempts: %d is negative", ErrConfig, c.MaxAttempts)
	case badDestinations(c.Destinations) != "":
		return nil, fmt.Errorf("%w: Destinations: %s", ErrConfig, badDestinations(c.Destinations))
	case c.Concurrency < 0 || c.Concurrency > maxConcurrency:
		return nil, fmt.Errorf("%w: Concurrency: %d is outside 0..%d", ErrConfig, c.Concurrency, maxConcurrency)
	case c.SegmentsInFlight < 0 || c.SegmentsInFlight > maxSegmentsInFlight:
		return nil, fmt.Errorf("%w: SegmentsInFlight: %d is outside 0..%d", ErrConfig, c.SegmentsInFlight, maxSegmentsInFlight)
	case c.VersionPolicy > VersionKeep:
		return nil, fmt.Errorf("%w: VersionPolicy: unknown policy %d", ErrConfig, c.VersionPolicy)
	case c.Lease < 0:
		return nil, fmt.Errorf("%w: Lease: %s is negative", ErrConfig, c.Lease)
	case c.Lease > 0 && c.Lease < 100*time.Millisecond:
		return nil, fmt.Errorf("%w: Lease: %s is shorter than 100ms", ErrConfig, c.Lease)
	case c.Lease > time.Hour:
		return nil, fmt.Errorf("%w: Lease: %s is longer than an hour (other restorers take a claim over after at most an hour unchanged)", ErrConfig, c.Lease)
	case c.CheckpointInterval < 0:
		return nil, fmt.Errorf("%w: CheckpointInterval: %s is negative", ErrConfig, c.CheckpointInterval)
	case c.BlockSize > segment.MaxBlockSize:
		return nil, fmt.Errorf("%w: BlockSize: %s exceeds the maximum %d", ErrConfig, c.BlockSize, segment.MaxBlockSize)
	}
	maxRecord, err := c.maxRecordSize()
	if err != nil {
		return nil, err
	}
	// A block holds records up to BlockSize, or one larger record.
	r.maxBlock = max(int(c.BlockSize), segment.DefaultBlockSize, maxRecord+segment.MaxBlockSize-segment.MaxRecordSize)
	for i, w := range c.Windows {
		if w.Start < 0 || w.Start >= 24*time.Hour || w.End < 0 || w.End > 24*time.Hour || w.Start == w.End {
			return nil, fmt.Errorf("%w: Windows[%d]: %s-%s is not a window within a day", ErrConfig, i, w.Start, w.End)
		}
	}
	for name, l := range map[string]Limits{"Ready": c.Retention.Ready, "Quarantine": c.Retention.Quarantine, "Archive": c.Retention.Archive} {
		if l.MaxAge < 0 || l.MaxSegments < 0 {
			return nil, fmt.Errorf("%w: Retention.%s: negative limit %+v", ErrConfig, name, l)
		}
	}
	if c.Retention.Interval < 0 {
		return nil, fmt.Errorf("%w: Retention.Interval: %s is negative", ErrConfig, c.Retention.Interval)
	}
	if r.Retention.Interval == 0 {
		r.Retention.Interval = time.Minute
	}
	if r.CheckInterval == 0 {
		r.CheckInterval = time.Second
	}
	if r.PostponeInterval == 0 {
		r.PostponeInterval = r.CheckInterval
	}
	if r.AllowRate == 0 {
		r.AllowRate = 0.95
	}
	if r.RetryBase == 0 {
		r.RetryBase = 50 * time.Millisecond
	}
	if r.RetryMax == 0 {
		r.RetryMax = max(5*time.Second, r.RetryBase)
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 10
	}
	if r.Concurrency == 0 {
		r.Concurrency = 1
	}
	if r.SegmentsInFlight == 0 {
		r.SegmentsInFlight = DefaultSegmentsInFlight
	}
	if r.MaxReplays == 0 {
		r.MaxReplays = 5
	}
	if r.Lease == 0 {
		r.Lease = 30 * time.Second
	}
	if r.MetricsWriter == nil {
		r.MetricsWriter = NopMetrics{}
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Owner == "" {
		host, _ := os.Hostname()
		r.Owner = fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
	}
	r.rater, _ = c.Queue.(interface{ Rate() float32 })
	if c.TracerProvider != nil {
		r.tracer = c.TracerProvider.Tracer(tracerName)
	}
	r.keys = c.Encryption.keyring()
	return r, nil
}

// served names the destinations a Restorer serves, for messages.
func (c *restorerConfig) served() string {
	names := []string{`"" (its Queue)`}
	for n := range c.Destinations {
		names = append(names, strconv.Quote(n))
	}
	slices.Sort(names[1:])
	return strings.Join(names, ", ")
}

// Serves reports whether a destination name is one of the Restorer's:
// "" (its Queue) or a name of Config.Destinations.
func (r *Restorer) Serves(destination string) bool {
	_, ok := r.c.Destinations[destination]
	return destination == "" || ok
}

// Destinations returns the names of the destinations the Restorer serves,
// sorted: "" (its Queue) first.
func (r *Restorer) Destinations() []string {
	names := []string{""}
	for n := range r.c.Destinations {
		names = append(names, n)
	}
	slices.Sort(names[1:])
	return names
}

// badDestinations says what is wrong with Config.Destinations, "" if
// nothing.
func badDestinations(d map[string]queue.Enqueuer) string {
	for name, q := range d {
		if len(name) > 64 || sink.CheckKey(name) != nil {
			return fmt.Sprintf("name %q: want 1 to 64 letters, digits, '.', '_' or '-'", name)
		}
		if q == nil {
			return fmt.Sprintf("%q: nil destination", name)
		}
	}
	return ""
}

// maxConcurrency bounds Config.Concurrency.
const maxConcurrency = 1024

// defaultMaxRecordSize is Config.MaxRecordSize's default.
const defaultMaxRecordSize = 8 * Megabyte

// maxRecordSize returns Config.MaxRecordSize, checked, or its default.
func (c *Config) maxRecordSize() (int, error) {
	switch {
	case c.MaxRecordSize == 0:
		return int(defaultMaxRecordSize), nil
	case c.MaxRecordSize > segment.MaxRecordSize:
		return 0, fmt.Errorf("%w: MaxRecordSize: %s exceeds the maximum %s", ErrConfig, c.MaxRecordSize, MemorySize(segment.MaxRecordSize))
	}
	return int(c.MaxRecordSize), nil
}

// DefaultSegmentsInFlight is Config.SegmentsInFlight's default: after a
// crash, at most this many blocks (one per segment in flight) are
// delivered twice.
const DefaultSegmentsInFlight = 8

// maxSegmentsInFlight bounds Config.SegmentsInFlight.
const maxSegmentsInFlight = 256

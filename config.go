package dlqdump

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/koykov/queue"
	"go.opentelemetry.io/otel/trace"

	"github.com/dlqdump/dlqdump/encoder"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Codec chooses how the Queue compresses blocks. Every block records its
// codec, so readers handle segments written with any of them.
type Codec uint8

// Codecs.
const (
	// Zstd compresses with zstd: about 4x smaller on typical JSON dead
	// letters, about 100 MB/s per core at the default level. The default.
	Zstd Codec = iota
	// S2 compresses with S2: several times faster than zstd, larger output.
	S2
	// NoCompression stores blocks as they are.
	NoCompression
)

func (c Codec) segmentCodec() (segment.Codec, error) {
	switch c {
	case Zstd:
		return segment.CodecZstd, nil
	case S2:
		return segment.CodecS2, nil
	case NoCompression:
		return segment.CodecNone, nil
	}
	return 0, fmt.Errorf("%w: Codec: unknown codec %d", ErrConfig, c)
}

// String returns "zstd", "s2" or "none".
func (c Codec) String() string {
	sc, err := c.segmentCodec()
	if err != nil {
		return fmt.Sprintf("Codec(%d)", uint8(c))
	}
	return sc.String()
}

// Config configures a Queue (the dumper) and a Restorer, as in the seed: each
// reads its own fields and ignores the other's. Every field documents its
// default; the zero Config is not valid for either.
type Config struct {
	// Version is the version of the items' encoding. The Queue stores it in
	// every segment; the Restorer compares it with each segment's before
	// restoring. Default 0.0.0.0.
	Version Version

	// MetricsWriter receives events. Default NopMetrics.
	MetricsWriter MetricsWriter
	// Logger receives logs; payloads and secrets are never logged.
	// Default: discard.
	Logger *slog.Logger

	// Queue fields.

	// Capacity is the largest stored size of a segment, in bytes, its
	// header (with an encrypted segment's key section) and footer included.
	// A segment is sealed and published before it would grow past
	// Capacity; a single record larger than that gets a segment of its own.
	// Required; at least 4 KiB.
	Capacity MemorySize
	// FlushInterval is how long a segment stays open after its first record
	// before it is sealed and published even if not full. Default 30s.
	FlushInterval time.Duration
	// Encoder turns items into bytes. Default encoder.Builtin (strings,
	// byte slices, Byter and Stringer).
	Encoder Encoder
	// Writer is where segments are published. Required.
	Writer Writer
	// Durable makes Enqueue return only after the record is synced to
	// stable storage (group commit: concurrent callers share one sync).
	// NewQueue refuses it with a Writer that cannot sync (see
	// sink.DurabilityChecker; an s3.Writer needs SpoolDir). Default false:
	// see the package documentation for what a crash can lose then.
	Durable bool
	// MaxPending bounds the bytes accepted but not yet written (plus the
	// Writer's backlog, see sink.Backlogger). Past it Enqueue waits up to
	// EnqueueTimeout, then fails with ErrBackpressure. Queue.Rate reports
	// the pending bytes over MaxPending. The Queue keeps the buffers of
	// written blocks for reuse while all its block buffers fit what the
	// blocks of MaxPending pending bytes need at most (about 2.5 times it
	// with S2 or NoCompression, 1.6 times with zstd), and lets go of them
	// when a segment is sealed for another reason than its size.
	// Default 64 MiB.
	MaxPending MemorySize
	// EnqueueTimeout is how long Enqueue waits for room under MaxPending
	// and, when Durable, for the sync. Negative: do not wait. Default 1s.
	EnqueueTimeout time.Duration
	// BlockSize is the raw size at which records are cut into a block and
	// compressed. Larger blocks compress better and cost more memory per
	// reader. Default 256 KiB, or less to fit Capacity; at most Capacity
	// minus the segment's framing (with Encryption, its key section too).
	BlockSize MemorySize
	// MaxRecordSize is the largest record, its headers included, that a
	// Queue dumps and a Restorer reads: the Queue refuses a larger item
	// (ErrTooLarge), and a Restorer stops at a block larger than this or
	// BlockSize, whichever is larger: the segment goes to quarantine with
	// its progress at that block, saying so, and a Restorer with a larger
	// MaxRecordSize goes on from there once it is released. It bounds the
	// memory a segment can make
	// a Restorer hold, whatever the segment claims: about one block of
	// that size while it is delivered (docs/MEMORY.md). Give the Queue and
	// the Restorer the same value. At most 64 MiB. Default 8 MiB.
	MaxRecordSize MemorySize
	// Codec is how blocks are compressed. Default Zstd.
	Codec Codec
	// CompressionLevel is the codec's level: for Zstd a zstd level (1
	// fastest, 3 default, up to 19); for S2 1 (fast), 2 (better), 3
	// (best). Default 0: the codec's default.
	CompressionLevel int
	// Compressors is the number of goroutines compressing blocks.
	// Default GOMAXPROCS.
	Compressors int
	// Source, when set, is stored as the "source" header of every record
	// that does not carry one. Default "".
	Source string
	// NoSummary writes segments without a summary. A summary (written
	// before a segment's footer, see docs/SELECT.md) lets every selection
	// (cat, restore, jobs, the console) skip segments, and blocks of
	// them, that hold no record it selects; it costs a few percent of a
	// segment's bytes and of the compressors' time, and readers that
	// predate summaries refuse segments that carry one. Default false:
	// every segment carries a summary.
	NoSummary bool

	// Restorer fields.

	// Reader is where segments are restored from. Required.
	Reader Reader
	// Decoder turns records back into items. Required.
	Decoder Decoder
	// Queue is the destination restored items are enqueued into (seed:
	// Queue). When it has a Rate method (koykov's queue.Interface does),
	// AllowRate applies; a plain Enqueue(any) error is enough otherwise.
	// Required.
	Queue queue.Enqueuer
	// Destinations names other destinations a pass may deliver into
	// (RunOptions.Destination): a restore job names one, and a runner
	// takes only the jobs whose destination its Restorer serves. A name
	// is 1 to 64 letters, digits, '.', '_' or '-'. Default: none but
	// Queue, served as "".
	Destinations map[string]queue.Enqueuer
	// CheckInterval is how often the background restorer (Start) looks for
	// ready segments. Default 1s.
	CheckInterval time.Duration
	// AllowRate: while the destination's Rate() is above it, delivery
	// waits, checking every PostponeInterval. Set it to 1 to fill the
	// destination completely. Default 0.95.
	AllowRate float32
	// PostponeInterval is how often a postponed delivery checks the
	// destination's Rate again. Default CheckInterval.
	PostponeInterval time.Duration
	// RateLimit caps deliveries per second (like SQS redrive velocity).
	// Default 0: no limit.
	RateLimit float64
	// RetryBase and RetryMax bound the exponential backoff, with full
	// jitter, between attempts to enqueue a record the destination
	// refused. Default 50ms and 5s.
	RetryBase, RetryMax time.Duration
	// MaxAttempts is how many times a refused record is offered before it
	// is quarantined with the last error. Default 10.
	MaxAttempts int
	// Concurrency is how many Enqueue calls the Restorer makes into Queue
	// at once, for a destination that is slow to answer (an HTTP endpoint,
	// another service) rather than slow to work: the Queue must then be
	// safe for concurrent use. Records are handed out in order and what
	// became of each (delivered, set aside, or a stop) is applied in that
	// order, so a checkpoint never passes a record whose delivery has not
	// ended, and a block's deliveries all end before its checkpoint: a
	// crash still delivers at most one block of each segment in flight
	// twice. A pass that stops at a record (ctx, Close, Limit,
	// ErrUnavailable) resumes there, so the records after it that were
	// accepted meanwhile, at most Concurrency-1, are delivered again.
	// Default 1: one at a time, also with several SegmentsInFlight.
	Concurrency int
	// SegmentsInFlight is how many segments a Restorer works on at once:
	// each is claimed, read, delivered block by block with a checkpoint
	// after each block, and deleted (or archived) with its record, and the
	// round trips of the segments in flight overlap instead of adding up
	// (S3: some milliseconds each, ten or more on AWS), the checkpoints
	// too: while one segment's checkpoint is on its way, another delivers
	// a block. Each segment delivers in its own order; the segments take
	// turns a block at a time, so the Queue sees at most Concurrency
	// Enqueue calls at once. A crash delivers at most one block twice per
	// segment in flight: SegmentsInFlight blocks at most. A segment whose
	// last checkpoint is stored leaves its place to the next while it is
	// deleted with its record, so as many more may be finishing, holding
	// their claims and delivering nothing. A dry run, a pass with a Limit
	// or an OnBlock, and a pass over the quarantine work on one segment at
	// a time. Each segment in flight holds a claim (renewed every Lease/3)
	// and its read-ahead (see s3.Reader.ReadAhead; the decoded blocks
	// ahead of delivery share segment.DefaultReadAhead). 1: one at a time,
	// and one block twice at most. Default 8 (DefaultSegmentsInFlight).
	SegmentsInFlight int
	// MaxReplays quarantines records that were restored and dead-lettered
	// again this many times (HeaderReplays), instead of cycling forever.
	// The count travels with items that are HeaderCarriers, or as Envelopes
	// with DeliverEnvelope. Negative: no limit. Default 5.
	MaxReplays int
	// DeliverEnvelope makes the Restorer enqueue *Envelope{Item, Headers}
	// instead of the bare item, so the destination's worker sees the
	// headers and a Queue dumping it again keeps them. The headers hold
	// the record's ID in HeaderRecordID: the same on every delivery of
	// the record (a crash's re-delivery, after cp, mv, rewrap and a
	// release), a key a destination deduplicates by (an adapter uses it
	// as the message ID). Default false.
	DeliverEnvelope bool
	// TracerProvider, when set, makes the delivery of every record an
	// OpenTelemetry span ("dlqdump.replay", of kind producer), a child of
	// the context given to Run, linked to the span that dead-lettered the
	// record (its HeaderTraceParent, see WithTrace), ending with the
	// delivery's outcome. The destination receives the replay span's
	// context in HeaderTraceParent and HeaderTraceState instead of the
	// original's (with DeliverEnvelope, or in a HeaderCarrier's headers),
	// so a consumer continuing it continues the replay. Default nil: no
	// spans, and no cost (the global TracerProvider is not used); the
	// headers are delivered as they were dumped.
	TracerProvider trace.TracerProvider
	// VersionPolicy says what to do with a segment whose Version differs
	// from Config.Version and is not accepted by VersionCompatible.
	// Default VersionQuarantine.
	VersionPolicy VersionPolicy
	// VersionCompatible, when set, accepts segments of other versions (e.g.
	// the same major). Default nil: only the same Version is restored.
	VersionCompatible func(segment, restorer Version) bool
	// Lease is how long a claim on a segment lasts without renewal; a
	// restorer that dies is taken over after it. A live restorer renews its
	// claims every Lease/3. From 100ms to an hour. Default 30s.
	Lease time.Duration
	// CheckpointInterval is the least time between two checkpoints while a
	// segment is restored. A checkpoint is written after every block (so a
	// crash delivers at most one block of each segment in flight twice)
	// unless the previous one is younger than this; the last block's is
	// always written. On a distant store (S3) the default is the fast one
	// when several segments are ready: their checkpoints' round trips
	// overlap (see SegmentsInFlight). Within one segment each block waits
	// for the previous one's checkpoint; setting this trades the one-block
	// bound for fewer writes there: a crash then delivers up to this
	// long's deliveries twice. Default 0.
	CheckpointInterval time.Duration
	// Archive moves restored segments to the archive area instead of
	// deleting them. Default false.
	Archive bool
	// Windows restricts the background restorer to times of day, e.g.
	// 01:00-05:00 in some location (see DailyWindow). A segment being
	// restored when a window closes is released at its next block.
	// Default: always.
	Windows []Window
	// Owner names this restorer in claims, for people: replicas of a
	// service may share one. Default "HOST-PID-RANDOM".
	Owner string
	// Retention bounds what the store keeps, per area; see Retention.
	// Default: no limit.
	Retention Retention

	// Encryption encrypts the segments the Queue writes (its Recipients)
	// and decrypts those the Restorer reads (its Identities); see
	// Encryption. Default nil: segments are not encrypted, and a Restorer
	// leaves encrypted ones in place.
	Encryption *Encryption
}

// VersionPolicy says what a Restorer does with a segment of another Version.
type VersionPolicy uint8

// Version policies.
const (
	// VersionQuarantine moves the segment to quarantine with the reason; it
	// can be released once a restorer accepts its version. The default.
	VersionQuarantine VersionPolicy = iota
	// VersionDelete deletes the segment (the seed's behaviour), logging and
	// counting what was dropped. Only when explicitly chosen.
	VersionDelete
	// VersionKeep leaves the segment in place for another restorer.
	VersionKeep
)

// String returns "quarantine", "delete" or "keep".
func (p VersionPolicy) String() string {
	switch p {
	case VersionQuarantine:
		return "quarantine"
	case VersionDelete:
		return "delete"
	case VersionKeep:
		return "keep"
	}
	return fmt.Sprintf("VersionPolicy(%d)", uint8(p))
}

// queueConfig is a validated copy of the Queue's fields.
type queueConfig struct {
	Config
	codec     segment.Codec
	blockSize int
	maxRecord int
}

const minCapacity = 4 * Kilobyte

func (c *Config) queueConfig() (*queueConfig, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Config", ErrConfig)
	}
	q := &queueConfig{Config: *c}
	switch {
	case c.Writer == nil:
		return nil, fmt.Errorf("%w: Writer: required (e.g. &fs.Writer{Directory: dir})", ErrConfig)
	case c.Capacity == 0:
		return nil, fmt.Errorf("%w: Capacity: required, the largest size of a segment in bytes (e.g. 64 * dlqdump.Megabyte)", ErrConfig)
	case c.Capacity < minCapacity:
		return nil, fmt.Errorf("%w: Capacity: %s is less than the minimum %s", ErrConfig, c.Capacity, minCapacity)
	case c.FlushInterval < 0:
		return nil, fmt.Errorf("%w: FlushInterval: %s is negative", ErrConfig, c.FlushInterval)
	case c.Compressors < 0:
		return nil, fmt.Errorf("%w: Compressors: %d is negative", ErrConfig, c.Compressors)
	case c.CompressionLevel < 0 || c.CompressionLevel > 22:
		return nil, fmt.Errorf("%w: CompressionLevel: %d is outside 0..22", ErrConfig, c.CompressionLevel)
	}
	if c.Durable {
		if dc, ok := c.Writer.(sink.DurabilityChecker); ok {
			if err := dc.CheckDurable(); err != nil {
				if !errors.Is(err, ErrConfig) {
					err = fmt.Errorf("%w: Durable: the Writer cannot sync: %w", ErrConfig, err)
				}
				return nil, err
			}
		}
	}
	codec, err := c.Codec.segmentCodec()
	if err != nil {
		return nil, err
	}
	if q.maxRecord, err = c.maxRecordSize(); err != nil {
		return nil, err
	}
	if err := c.Encryption.checkQueue(); err != nil {
		return nil, err
	}
	q.codec = codec
	if q.FlushInterval == 0 {
		q.FlushInterval = 30 * time.Second
	}
	if q.Encoder == nil {
		q.Encoder = encoder.Builtin{}
	}
	if q.MaxPending == 0 {
		q.MaxPending = 64 * Megabyte
	}
	if q.EnqueueTimeout == 0 {
		q.EnqueueTimeout = time.Second
	}
	if q.Compressors == 0 {
		q.Compressors = runtime.GOMAXPROCS(0)
	}
	if q.MetricsWriter == nil {
		q.MetricsWriter = NopMetrics{}
	}
	if q.Logger == nil {
		q.Logger = slog.New(slog.DiscardHandler)
	}
	// A block of BlockSize raw bytes must fit in an empty segment even if it
	// does not compress, with an encrypted segment's key section and tag.
	room := int64(c.Capacity) - segment.HeaderSize - segment.BlockHeaderSize - segmentFooterSize(1)
	keys, err := c.Encryption.overhead()
	if err != nil {
		return nil, err
	}
	room -= keys
	with := ""
	if keys > 0 {
		with = fmt.Sprintf(", after the %d bytes encryption adds to its header and block", keys)
	}
	bs := int64(c.BlockSize)
	switch {
	case bs == 0 && room < 512:
		return nil, fmt.Errorf("%w: Capacity: %s leaves %d bytes for a block%s; at least 512 are needed", ErrConfig, c.Capacity, room, with)
	case bs == 0:
		bs = min(segment.DefaultBlockSize, room)
	case bs > room:
		return nil, fmt.Errorf("%w: BlockSize: %s does not fit in a segment of Capacity %s (at most %d bytes%s)", ErrConfig, c.BlockSize, c.Capacity, room, with)
	case bs < 512:
		return nil, fmt.Errorf("%w: BlockSize: %s is less than 512 bytes", ErrConfig, c.BlockSize)
	case bs > segment.MaxBlockSize:
		return nil, fmt.Errorf("%w: BlockSize: %s exceeds the maximum %d", ErrConfig, c.BlockSize, segment.MaxBlockSize)
	}
	q.blockSize = int(bs)
	return q, nil
}

// segmentFooterSize is the size of a footer (with trailer) for n blocks.
func segmentFooterSize(n int) int64 {
	return segment.FooterFixedSize + int64(n)*segment.IndexEntrySize + 4 + segment.TrailerSize
}

package dlqdump

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/dlqdump/dlqdump/encoder"
	"github.com/dlqdump/dlqdump/segment"
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

	// Capacity is the largest stored size of a segment, in bytes. A segment
	// is sealed and published before it would grow past Capacity; a single
	// record larger than that gets a segment of its own. Required; at
	// least 4 KiB.
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
	// Default false: see the package documentation for what a crash can
	// lose then.
	Durable bool
	// MaxPending bounds the bytes accepted but not yet written (plus the
	// Writer's backlog, see Backlogger). Past it Enqueue waits up to
	// EnqueueTimeout, then fails with ErrBackpressure. Queue.Rate reports
	// the pending bytes over MaxPending. Default 64 MiB.
	MaxPending MemorySize
	// EnqueueTimeout is how long Enqueue waits for room under MaxPending
	// and, when Durable, for the sync. Negative: do not wait. Default 1s.
	EnqueueTimeout time.Duration
	// BlockSize is the raw size at which records are cut into a block and
	// compressed. Larger blocks compress better and cost more memory per
	// reader. Default 256 KiB; at most Capacity minus the segment's framing.
	BlockSize MemorySize
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
}

// queueConfig is a validated copy of the Queue's fields.
type queueConfig struct {
	Config
	codec     segment.Codec
	blockSize int
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
	codec, err := c.Codec.segmentCodec()
	if err != nil {
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
	// does not compress.
	room := int64(c.Capacity) - segment.HeaderSize - segment.BlockHeaderSize - segmentFooterSize(1)
	bs := int64(c.BlockSize)
	switch {
	case bs == 0:
		bs = min(segment.DefaultBlockSize, room)
	case bs > room:
		return nil, fmt.Errorf("%w: BlockSize: %s does not fit in a segment of Capacity %s (at most %d bytes)", ErrConfig, c.BlockSize, c.Capacity, room)
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

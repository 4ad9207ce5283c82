package s3

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Key layout under Prefix. A segment's key is Prefix + area prefix + name.
const (
	// QuarantinePrefix holds quarantined segments, each with the reason in
	// its metadata (MetaReason).
	QuarantinePrefix = "quarantine/"
	// ArchivePrefix holds restored segments when archiving is on.
	ArchivePrefix = "archive/"
	// ClaimsPrefix holds one claim object per claimed ready segment:
	// Prefix + ClaimsPrefix + name + ClaimSuffix.
	ClaimsPrefix = ".claims/"
	// ClaimSuffix ends the key of a claim object.
	ClaimSuffix = ".claim"
	// StagingPrefix holds the segments staged on behalf of a claim before
	// its claim record lets them be published (sink.AreaStaging).
	StagingPrefix = ".staging/"

	// MetaReason is the user metadata key (sent as the header
	// x-amz-meta-dlqdump-reason) holding why a quarantined segment was moved
	// aside. Values that are not printable ASCII are stored RFC 2047
	// encoded.
	MetaReason = "dlqdump-reason"
	// MetaChecksum is the user metadata key (x-amz-meta-dlqdump-crc32c)
	// holding the CRC-32C of the segment's bytes in hex. A retried upload
	// that finds the object already there compares it (and the size) to
	// tell its own earlier, successful attempt from another object.
	MetaChecksum = "dlqdump-crc32c"

	maxReasonLen = 1024 // bytes of reason kept in metadata (S3 allows 2 KiB in all)
)

// Errors of this package, besides the dlqdump sentinels (ErrNotFound,
// ErrClaimed, ErrLeaseLost, ErrConfig, ErrClosed) that its methods wrap.
var (
	// ErrName means a segment name is not a plain name ending in ".dlq"
	// (no "/" or "\", not starting with ".").
	ErrName = errors.New("dlqdump: s3: bad segment name")
	// ErrSpoolFull means Commit waited Writer.SpoolWait for room in the
	// spool and there was none, because uploads are failing or slower than
	// the dump. The segment was not taken; the Queue keeps it and retries.
	ErrSpoolFull = errors.New("dlqdump: s3: upload spool full")
	// ErrConflict means another object, with other bytes, already exists
	// under a segment's key.
	ErrConflict = fmt.Errorf("dlqdump: s3: another object exists under the segment's key: %w", sink.ErrExist)
)

// OpError is the error of a failed S3 call: the operation, the bucket and the
// key, and the cause (the SDK's error, or the context's).
type OpError struct {
	Op     string // the S3 operation, e.g. "PutObject"
	Bucket string // the bucket
	Key    string // the object's key (or the listed prefix)
	Err    error  // the cause
}

// Error returns "dlqdump: s3: OP s3://BUCKET/KEY: CAUSE".
func (e *OpError) Error() string {
	return fmt.Sprintf("dlqdump: s3: %s s3://%s/%s: %v", e.Op, e.Bucket, e.Key, e.Err)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// Retry says how S3 calls are retried. A failure is transient, and retried,
// when S3 answers 5xx, 429 or a throttling code (SlowDown, ...), a request
// times out, or the connection fails (refused, reset, cut short). Other
// failures (403, 404, 412, ...) are returned at once. Waits grow
// exponentially from BaseDelay to MaxDelay with full jitter (a random wait
// between zero and the bound). Each attempt is one HTTP request: the
// client's own retryer is limited to one attempt per call, so this policy
// alone decides how often and how soon a call is repeated.
type Retry struct {
	// MaxAttempts bounds the attempts of a call made on behalf of a caller
	// (Reader methods, reads of an open segment, claims). The Writer's
	// background uploads are retried without bound until they succeed or
	// the Writer is closed. Default 5.
	MaxAttempts int
	// BaseDelay is the bound of the first wait. Default 100ms.
	BaseDelay time.Duration
	// MaxDelay caps the bound of the waits. Default 10s.
	MaxDelay time.Duration
	// AttemptTimeout bounds one attempt (one HTTP request and its body),
	// plus one second per MiB of payload. Default 1 minute.
	AttemptTimeout time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 5
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = 100 * time.Millisecond
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 10 * time.Second
	}
	if r.MaxDelay < r.BaseDelay {
		r.MaxDelay = r.BaseDelay
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = time.Minute
	}
	return r
}

// backoff returns the wait after the attempt-th failure: full jitter.
func (r Retry) backoff(attempt int) time.Duration {
	return backoff.FullJitter(r.BaseDelay, r.MaxDelay, attempt)
}

func (r Retry) timeout(payload int64) time.Duration {
	return r.AttemptTimeout + time.Duration(payload>>20)*time.Second
}

// store is what Writer and Reader share: the client, where and how to call it.
type store struct {
	client *awss3.Client
	bucket string
	prefix string
	retry  Retry
	log    *slog.Logger

	multipartThreshold int64
	partSize           int64
	partConcurrency    int
}

func newLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

func checkConfig(kind string, client *awss3.Client, bucket string) error {
	if client == nil {
		return fmt.Errorf("%w: s3.%s.Client: required", dlqdump.ErrConfig, kind)
	}
	if bucket == "" {
		return fmt.Errorf("%w: s3.%s.Bucket: required", dlqdump.ErrConfig, kind)
	}
	return nil
}

// Defaults of the upload fields.
const (
	// DefaultMultipartThreshold is the size above which a segment is
	// uploaded in parts.
	DefaultMultipartThreshold = 16 * dlqdump.Megabyte
	// DefaultPartSize is the size of the parts of a multipart upload.
	DefaultPartSize = 8 * dlqdump.Megabyte
	// DefaultPartConcurrency is how many parts are uploaded at once.
	DefaultPartConcurrency = 4

	minPartSize = 5 << 20 // S3's minimum for all parts but the last
	maxParts    = 10000
)

func (s *store) setUpload(threshold, partSize int64, conc int) {
	s.multipartThreshold = threshold
	if s.multipartThreshold <= 0 {
		s.multipartThreshold = int64(DefaultMultipartThreshold)
	}
	s.partSize = partSize
	if s.partSize <= 0 {
		s.partSize = int64(DefaultPartSize)
	}
	s.partSize = max(s.partSize, minPartSize)
	s.partConcurrency = conc
	if s.partConcurrency <= 0 {
		s.partConcurrency = DefaultPartConcurrency
	}
}

// areaPrefix returns the key prefix of an area.
func (s *store) areaPrefix(a sink.Area) (string, error) {
	switch a {
	case sink.AreaReady:
		return s.prefix, nil
	case sink.AreaQuarantine:
		return s.prefix + QuarantinePrefix, nil
	case sink.AreaArchive:
		return s.prefix + ArchivePrefix, nil
	case sink.AreaStaging:
		return s.prefix + StagingPrefix, nil
	}
	return "", fmt.Errorf("dlqdump: s3: unknown area %v", a)
}

// key returns the key of segment name in area a.
func (s *store) key(a sink.Area, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	p, err := s.areaPrefix(a)
	if err != nil {
		return "", err
	}
	return p + name, nil
}

func (s *store) claimKey(name string) string { return s.prefix + ClaimsPrefix + name + ClaimSuffix }

func (s *store) opErr(op, key string, err error) error {
	return &OpError{Op: op, Bucket: s.bucket, Key: key, Err: err}
}

// call runs fn, one attempt per call, until it succeeds, fails with an error
// that is not transient, ctx is done, or (when bounded) Retry.MaxAttempts
// attempts failed. Each attempt gets Retry.timeout(payload). The error is an
// *OpError naming op and key.
func (s *store) call(ctx context.Context, op, key string, payload int64, bounded bool, fn func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, s.retry.timeout(payload))
		err := fn(actx)
		timedOut := err != nil && ctx.Err() == nil && actx.Err() != nil
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return s.opErr(op, key, fmt.Errorf("%w (last error: %w)", ctx.Err(), err))
		}
		if timedOut {
			err = fmt.Errorf("attempt timed out after %s: %w", s.retry.timeout(payload), err)
		} else if !transient(err) {
			return s.opErr(op, key, err)
		}
		if bounded && attempt >= s.retry.MaxAttempts {
			return s.opErr(op, key, fmt.Errorf("gave up after %d attempts: %w", attempt, err))
		}
		d := s.retry.backoff(attempt)
		s.log.Debug("S3 call failed; retrying", slog.String("op", op), slog.String("bucket", s.bucket), slog.String("key", key),
			slog.Int("attempt", attempt), slog.Duration("wait", d), slog.Any("error", err))
		if serr := backoff.Sleep(ctx, d); serr != nil {
			return s.opErr(op, key, fmt.Errorf("%w (last error: %w)", serr, err))
		}
	}
}

// oneAttemptClient returns a client like c whose retryer makes one attempt
// per call: store.call does the retrying, with Retry's waits (the SDK's own
// back off by up to seconds per attempt and would multiply the attempts).
//
// The new client shares no mutable SDK state with c or with other clients
// derived from it. Options are copied shallowly, and awss3.New binds the
// SDK's default S3 Express credentials provider (a pointer every copy
// shares) to the client it builds, writing fields that the requests of every
// other client read: building a Writer's client while a Reader on the same
// caller's client lists was a data race, and rebound the caller's provider
// to our client. So the default provider is dropped and New makes a fresh
// one; a provider the caller set is kept (New does not change those). The
// caller's client is not changed.
func oneAttemptClient(c *awss3.Client) *awss3.Client {
	if c == nil {
		return nil
	}
	return awss3.New(c.Options(), func(o *awss3.Options) {
		o.RetryMaxAttempts = 1
		if o.ExpressCredentials != nil && reflect.TypeOf(o.ExpressCredentials) == defaultExpressProvider {
			o.ExpressCredentials = nil
		}
	})
}

// defaultExpressProvider is the type of the S3 Express credentials provider
// awss3.New makes when the options have none (unexported by the SDK).
var defaultExpressProvider = reflect.TypeOf(awss3.New(awss3.Options{}).Options().ExpressCredentials)

var retryables = retry.IsErrorRetryables(retry.DefaultRetryables)

// transient reports whether err is worth retrying.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var qe ratelimit.QuotaExceededError
	if errors.As(err, &qe) {
		return true // the client's own retry budget ran out
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, errShortBody) {
		return true
	}
	switch st := httpStatus(err); {
	case st == http.StatusTooManyRequests, st >= 500:
		return true
	case st == http.StatusConflict && apiCode(err) == "ConditionalRequestConflict":
		return true // S3: a concurrent conditional write; retry
	case st == http.StatusConflict && apiCode(err) == "ExistingObjectIsDirectory":
		// versitygw's POSIX backend answers so, now and then, to one of
		// several concurrent PUTs of one key (versity/versitygw#854,
		// #1988) although no such directory exists: retrying the
		// (conditional) write gets its real answer.
		return true
	}
	switch apiCode(err) {
	case "SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling", "ThrottlingException", "RequestTimeTooSkewed":
		return true
	}
	if retryables.IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

var errShortBody = errors.New("response body shorter than its range")

func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// notFound reports whether err says the object does not exist.
func notFound(err error) bool {
	switch apiCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	case "NoSuchBucket", "NoSuchUpload":
		return false
	}
	return httpStatus(err) == http.StatusNotFound
}

// preconditionFailed reports whether err is a failed If-Match/If-None-Match.
func preconditionFailed(err error) bool {
	return httpStatus(err) == http.StatusPreconditionFailed || apiCode(err) == "PreconditionFailed"
}

// checkName accepts the names segment.FileName makes and any other plain
// name ending in ".dlq".
func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, segment.Ext) || !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q", ErrName, name)
	}
	return nil
}

// encodeReason makes a reason fit an HTTP header: printable ASCII is kept,
// anything else is RFC 2047 encoded; it is cut to maxReasonLen bytes.
func encodeReason(reason string) string {
	if len(reason) > maxReasonLen {
		cut := maxReasonLen
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut] + "..."
	}
	for i := 0; i < len(reason); i++ {
		if c := reason[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return mime.QEncoding.Encode("utf-8", reason)
		}
	}
	return reason
}

func decodeReason(v string) string {
	if strings.HasPrefix(v, "=?") {
		if d, err := new(mime.WordDecoder).DecodeHeader(v); err == nil {
			return d
		}
	}
	return v
}

func newToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails on supported platforms
	return hex.EncodeToString(b[:])
}

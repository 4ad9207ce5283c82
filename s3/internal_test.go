package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func apiErr(status int, code string) error {
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: code, Message: "m"}},
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apiErr(500, "InternalError"), true},
		{apiErr(503, "SlowDown"), true},
		{apiErr(429, "TooManyRequests"), true},
		{apiErr(400, "RequestTimeout"), true},
		{apiErr(409, "ConditionalRequestConflict"), true},
		{apiErr(409, "ExistingObjectIsDirectory"), true}, // versitygw, under concurrent PUTs of one key
		{fmt.Errorf("op: %w", &net.OpError{Op: "read", Err: syscall.ECONNRESET}), true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("x: %w", errShortBody), true},
		{ratelimit.QuotaExceededError{}, true},
		{apiErr(403, "AccessDenied"), false},
		{apiErr(404, "NoSuchKey"), false},
		{apiErr(412, "PreconditionFailed"), false},
		{apiErr(409, "BucketAlreadyExists"), false},
		{context.Canceled, false},
		{errors.New("something else"), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if !notFound(apiErr(404, "NotFound")) || !notFound(apiErr(404, "NoSuchKey")) || notFound(apiErr(404, "NoSuchBucket")) {
		t.Error("notFound misclassifies")
	}
	if !preconditionFailed(apiErr(412, "PreconditionFailed")) || preconditionFailed(apiErr(409, "x")) {
		t.Error("preconditionFailed misclassifies")
	}
}

func TestBackoffFullJitter(t *testing.T) {
	r := Retry{BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond}.withDefaults()
	for attempt := 1; attempt < 40; attempt++ {
		bound := min(10*time.Millisecond<<min(attempt-1, 30), 80*time.Millisecond)
		var top time.Duration
		for range 200 {
			d := r.backoff(attempt)
			if d < 0 || d > bound {
				t.Fatalf("backoff(%d) = %s, outside [0, %s]", attempt, d, bound)
			}
			top = max(top, d)
		}
		if top < bound/2 {
			t.Fatalf("backoff(%d) never above %s in 200 draws; want full jitter up to %s", attempt, top, bound)
		}
	}
}

// call retries transient failures, gives up on others at once, bounds the
// attempts and stops with the context.
func TestCall(t *testing.T) {
	s := &store{bucket: "b", retry: Retry{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, AttemptTimeout: 50 * time.Millisecond}.withDefaults(), log: newLogger(nil)}
	ctx := context.Background()
	n := 0
	err := s.call(ctx, "PutObject", "k", 0, true, func(context.Context) error {
		if n++; n < 3 {
			return apiErr(503, "SlowDown")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("call = %v after %d attempts, want success after 3", err, n)
	}
	n = 0
	err = s.call(ctx, "PutObject", "k", 0, true, func(context.Context) error { n++; return apiErr(403, "AccessDenied") })
	var oe *OpError
	if n != 1 || !errors.As(err, &oe) || oe.Op != "PutObject" || oe.Bucket != "b" || oe.Key != "k" || !strings.Contains(err.Error(), "s3://b/k") {
		t.Fatalf("permanent failure: %d attempts, %v", n, err)
	}
	n = 0
	err = s.call(ctx, "GetObject", "k", 0, true, func(context.Context) error { n++; return apiErr(500, "InternalError") })
	if n != 4 || !strings.Contains(err.Error(), "gave up after 4 attempts") {
		t.Fatalf("bounded: %d attempts, %v", n, err)
	}
	// Attempts that hang are cut by AttemptTimeout and retried.
	n = 0
	err = s.call(ctx, "GetObject", "k", 0, true, func(ctx context.Context) error {
		if n++; n < 2 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("timed-out attempt: %d attempts, %v", n, err)
	}
	// Unbounded: until the context ends.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	err = s.call(cctx, "PutObject", "k", 0, false, func(context.Context) error { return apiErr(503, "SlowDown") })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "SlowDown") {
		t.Fatalf("unbounded call = %v, want the context's error with the last failure", err)
	}
}

func TestReasonEncoding(t *testing.T) {
	for _, r := range []string{"", "plain ascii: reason (42)", "naïve\nnewline", "=?utf-8?q?looks_encoded?=", strings.Repeat("é", 600)} {
		enc := encodeReason(r)
		for i := 0; i < len(enc); i++ {
			if c := enc[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
				t.Fatalf("encodeReason(%.20q) = %.40q: not printable ASCII", r, enc)
			}
		}
		got := decodeReason(enc)
		if len(r) <= maxReasonLen && got != r && !strings.HasPrefix(r, "=?") {
			t.Fatalf("reason %q came back as %q", r, got)
		}
		if len(r) > maxReasonLen && (!strings.HasSuffix(got, "...") || !strings.HasPrefix(r, strings.TrimSuffix(got, "..."))) {
			t.Fatalf("long reason came back as %.40q", got)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"20261122T101500.123456789Z-0123456789abcdef.dlq", "x.dlq"} {
		if err := checkName(ok); err != nil {
			t.Errorf("checkName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".dlq", "a/b.dlq", `a\b.dlq`, "x.dlq.open", "x", "\xff.dlq"} {
		if err := checkName(bad); !errors.Is(err, ErrName) {
			t.Errorf("checkName(%q) = %v, want ErrName", bad, err)
		}
	}
}

func TestRenamed(t *testing.T) {
	n := "20261122T101500.123456789Z-0123456789abcdef.dlq"
	r := renamed(n)
	if r == n || r[:27] != n[:27] || checkName(r) != nil {
		t.Fatalf("renamed(%s) = %s", n, r)
	}
	if r := renamed("odd.dlq"); !strings.HasPrefix(r, "odd-") || checkName(r) != nil {
		t.Fatalf("renamed(odd.dlq) = %s", r)
	}
}

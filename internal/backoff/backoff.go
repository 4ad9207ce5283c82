// Package backoff holds the waits shared by the Restorer, the S3 sink and the
// CLI: exponential back-off with full jitter, and a sleep that ends with its
// context.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// FullJitter returns the wait after the attempt-th failure (attempt >= 1): a
// random duration between zero and base doubled attempt-1 times, capped at
// maxWait (a bound that would overflow is maxWait).
func FullJitter(base, maxWait time.Duration, attempt int) time.Duration {
	shift := min(max(attempt-1, 0), 30)
	bound := base << shift
	if bound <= 0 || bound>>shift != base || bound > maxWait {
		bound = maxWait
	}
	if bound <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(bound) + 1))
}

// Sleep waits d or until ctx is done, returning ctx's error then. A
// non-positive d does not wait; it returns ctx's error, if any.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFullJitterBounds(t *testing.T) {
	for _, tc := range []struct {
		base, max time.Duration
		attempt   int
		bound     time.Duration
	}{
		{100 * time.Millisecond, 10 * time.Second, 1, 100 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Second, 4, 800 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Second, 20, 10 * time.Second},
		{10 * time.Second, time.Minute, 40, time.Minute}, // 10s<<30 overflows int64 nanoseconds
		{time.Second, time.Minute, 0, time.Second},
	} {
		var top time.Duration
		for range 2000 {
			d := FullJitter(tc.base, tc.max, tc.attempt)
			if d < 0 || d > tc.bound {
				t.Fatalf("FullJitter(%s, %s, %d) = %s, outside [0, %s]", tc.base, tc.max, tc.attempt, d, tc.bound)
			}
			top = max(top, d)
		}
		if top < tc.bound/2 {
			t.Errorf("FullJitter(%s, %s, %d): largest of 2000 waits %s, want some above %s", tc.base, tc.max, tc.attempt, top, tc.bound/2)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep(1ms) = %v", err)
	}
}

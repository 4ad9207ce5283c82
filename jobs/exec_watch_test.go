package jobs

import (
	"testing"
	"time"
)

// Velocity is measured over the last 10 s, from about 40 samples however
// often the counts are written; 0 until they span a second.
func TestVelocity(t *testing.T) {
	var v velocity
	t0 := time.Unix(1_800_000_000, 0)
	if r := v.add(t0, 0); r != 0 {
		t.Fatalf("one sample: %v", r)
	}
	var r float64
	for i := 1; i <= 30_000; i++ { // a write a millisecond, 100 records each, for 30 s
		r = v.add(t0.Add(time.Duration(i)*time.Millisecond), uint64(i)*100)
	}
	if r < 99_000 || r > 101_000 || len(v.at) > 2*velocitySamples {
		t.Fatalf("velocity %v over %d samples; want 100,000/s over at most %d", r, len(v.at), 2*velocitySamples)
	}
	if r := v.add(t0.Add(31*time.Second), 5); r != 0 {
		t.Fatalf("the count went back (another pass): %v, want 0 until a second passes", r)
	}
}

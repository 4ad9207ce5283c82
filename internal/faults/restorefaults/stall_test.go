package restorefaults

import (
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
)

// TestFaultsStalls/gofakes3 failed now and then with "left in the store:
// [record …]": a taker's claim write on a segment the resumed holder had
// just deleted took effect as its pass was cut short (the write reported
// "context canceled"), leaving a held record of a segment that is gone. A
// restorer's pass sweeps such a record once it has seen it unchanged for
// its lease; the harness's last passes stopped as soon as the ready area was
// empty, before that. The store is settled when no record is left but those
// of quarantined segments.
func TestReleaseSweepsAHeldRecordOfASegmentGone(t *testing.T) {
	ctx := t.Context()
	p, err := DirStore(func() (string, error) { return t.TempDir(), nil }).New()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().Add(-time.Hour).Truncate(time.Second)
	name := segment.FileName(created, segment.NewID(created))
	c, err := claims.NewClaimer(p.Reader, "taker", stallLease, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ClaimNew(ctx, name); err != nil { // held, never ended
		t.Fatal(err)
	}
	cfg := &dlqdump.Config{Reader: p.Reader, Decoder: decoder{}, Queue: &destination{}, Lease: stallLease, Owner: "release", Version: stallV1}
	if err := release(ctx, cfg, p.Reader); err != nil {
		t.Fatal(err)
	}
	left, err := p.leftovers(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("left in the store after the release: %v", left)
	}
}

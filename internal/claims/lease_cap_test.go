package claims

import (
	"errors"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Found in review: an observer honours a lease of at most MaxLease, but a
// Claimer accepted any longer lease; with 4 hours the holder renewed every
// 80 minutes and an observer took a live claim over after one hour. A lease
// past MaxLease is now refused, so a live holder always renews well within
// what observers honour.
func TestLeaseLongerThanTheObserversCapIsRefused(t *testing.T) {
	st, clk := setup(t)
	if _, err := NewClaimer(st, "a", 4*time.Hour, &Options{Now: clk.Now}); !errors.Is(err, sink.ErrConfig) {
		t.Fatalf("a 4h lease: %v, want ErrConfig", err)
	}
	ctx := t.Context()
	a, err := NewClaimer(st, "a", MaxLease, &Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewClaimer(st, "b", MaxLease, &Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("first look: %v, want ErrClaimed", err)
	}
	for range 6 { // the holder renews every third of the lease
		clk.Advance(MaxLease / 3)
		if err := ca.Save(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
			t.Fatalf("a live claim renewed every %s was taken: %v", MaxLease/3, err)
		}
	}
}

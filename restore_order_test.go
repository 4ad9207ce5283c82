package dlqdump

import (
	"fmt"
	"slices"
	"testing"
)

// A part the feeder reaches where other restorers hold claims (they took it
// oldest first from where they entered it) is taken from its newest end, so
// that the two meet in its middle instead of this restorer losing every
// segment in flight at their frontier; the order of the other parts, and of
// what Run reached, stays. A part nobody holds keeps its order, and so does
// one already turned, or one Run has reached.
func TestTurnTakesAPartOthersWorkFromItsNewestEnd(t *testing.T) {
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("seg-%02d", i)
	}
	newPl := func() *pipeline {
		pl := &pipeline{names: names, partSize: 4, started: map[string]bool{}, elsewhere: map[string]bool{}}
		// Shuffled: parts 2, 0, 1.
		pl.order = []int{8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7}
		pl.pos = make([]int, len(names))
		for k, i := range pl.order {
			pl.pos[i] = k
		}
		pl.runAt = 3
		return pl
	}

	pl := newPl()
	pl.elsewhere[names[0]] = true // another restorer holds part 0's oldest
	if !pl.turnLocked(4, 0, false) {
		t.Fatal("part 0, held by another at its oldest end, was not turned")
	}
	if want := []int{8, 9, 10, 11, 3, 2, 1, 0, 4, 5, 6, 7}; !slices.Equal(pl.order, want) {
		t.Fatalf("order %v, want %v", pl.order, want)
	}
	for k, i := range pl.order {
		if pl.pos[i] != k {
			t.Fatalf("pos[%d] = %d, want %d", i, pl.pos[i], k)
		}
	}
	if pl.turnLocked(4, 3, true) {
		t.Error("a part was turned twice")
	}

	pl = newPl()
	if pl.turnLocked(4, 0, false) {
		t.Error("a part nobody holds was turned")
	}
	if !pl.turnLocked(4, 0, true) {
		t.Error("the part where a run met another's claim was not turned")
	}

	pl = newPl()
	pl.elsewhere[names[0]] = true
	pl.runAt = 4
	if pl.turnLocked(4, 0, false) {
		t.Error("a part was turned at the position Run reached")
	}

	pl = newPl()
	pl.order, pl.pos = nil, nil // the listing's order: alone
	pl.elsewhere[names[0]] = true
	if pl.turnLocked(4, 4, false) {
		t.Error("a pass in the listing's order was turned")
	}
}

// Parts hold a 256th of a listing, from 64 segments to a page, except in
// listings smaller than 8 parts of 64, which are cut into eighths of at
// least 8 segments: the end of a drain, when what is left fits in one part of 64,
// is still spread over by the restorers sharing it.
func TestPartSize(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 8}, {5, 8}, {46, 8}, {100, 12}, {417, 52}, {512, 64}, {2000, 64}, {16384, 64}, {100000, 390}, {1000000, 1000},
	} {
		if got := partSize(c.n); got != c.want {
			t.Errorf("partSize(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

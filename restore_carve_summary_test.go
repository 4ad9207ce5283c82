package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// A carved side segment carries a summary unless Config.NoSummary (readers
// that predate summaries refuse segments with one). Before, side segments
// always carried one, whatever NoSummary said.
func TestCarvedSideSummaryFollowsNoSummary(t *testing.T) {
	for _, noSummary := range []bool{false, true} {
		t.Run(fmt.Sprint("NoSummary=", noSummary), func(t *testing.T) {
			st := carveStore(t, 40, 2)
			parent := st.Names(sink.AreaReady)[0]
			paused := errors.New("paused")
			stop, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			first := newCarveDest(nil)
			go func() { <-first.first; cancel(paused) }()
			r := newRestorer(t, dlqdump.Config{Reader: st, Queue: first, NoSummary: noSummary})
			rep, err := r.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Rate: 1000, Carve: true, Stop: stop})
			if !errors.Is(err, paused) || rep.Carved != 20 {
				t.Fatalf("the pass: %+v, %v; want 20 carved, paused", rep, err)
			}
			var side string
			for _, n := range st.Names(sink.AreaReady) {
				if n != parent {
					side = n
				}
			}
			if side == "" {
				t.Fatal("no side segment left ready")
			}
			f, err := st.Open(t.Context(), sink.AreaReady, side)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sr, err := segment.NewReader(f, f.Size(), nil)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := sr.Summary()
			if err != nil {
				t.Fatal(err)
			}
			if (sum != nil) == noSummary {
				t.Fatalf("NoSummary %v: the side segment's summary: %v", noSummary, sum)
			}
		})
	}
}

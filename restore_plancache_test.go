package dlqdump_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/selection"
)

// Many selective passes over one store (restore jobs: each its selection,
// each a dry run before its pass) plan each segment from what a Restorer
// read once: after the first pass, a pass opens only the segments its
// selection may select from. Before, every pass opened every segment of
// the store to plan it (here 20 opens per pass, where 1 is read).
func TestSelectivePassesPlanFromWhatWasRead(t *testing.T) {
	st := memsink.New()
	for s := range 20 {
		q := newQueue(t, dlqdump.Config{Writer: st.Writer(), Capacity: dlqdump.Megabyte})
		for i := range 10 {
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%d", s, i), Headers: dlqdump.Headers{"batch": fmt.Sprint(s)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cc := &callCounter{Store: st}
	r := newRestorer(t, dlqdump.Config{Reader: cc, Decoder: decoder.Fallthrough{AsString: true}, Queue: queueFunc(func(any) error { return nil })})
	for k := range 20 {
		sel, err := selection.Parse(fmt.Sprintf("batch = %d", k), nil)
		if err != nil {
			t.Fatal(err)
		}
		cc.opens.Store(0)
		for _, dry := range []bool{true, false} {
			rep, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel, DryRun: dry})
			if err != nil || rep.Delivered != 10 || rep.SkippedSegments != 19-k { // the segments of the batches before are restored
				t.Fatalf("pass %d (dry run %v): %+v, %v", k, dry, rep, err)
			}
		}
		want := int64(2) // the dry run's read and the pass's
		if k == 0 {
			want = 20 + 2 // planned once: every segment
		}
		if n := cc.opens.Load(); n != want {
			t.Fatalf("pass %d and its dry run opened %d segments, want %d", k, n, want)
		}
	}
}

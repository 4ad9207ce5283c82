package dlqdump_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/envelope"
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

// The Restorers over one Reader (a jobs.Runner's) share what they planned
// the unencrypted segments with: a store is planned once per process, not
// once per Restorer (before, the jobs one-store benchmark's 12 Restorers
// each opened the store's 71 segments to plan them, 12 times the store's
// bytes). An encrypted segment's plan (its sealed summary is read with its
// data key) stays each Restorer's own, and Restorers over another Reader
// plan for themselves.
func TestRestorersOverOneReaderShareTheirPlans(t *testing.T) {
	st := memsink.New()
	dump := func(batch int, enc *dlqdump.Encryption) {
		q := newQueue(t, dlqdump.Config{Writer: st.Writer(), Capacity: dlqdump.Megabyte, Encryption: enc})
		for i := range 10 {
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%d", batch, i), Headers: dlqdump.Headers{"batch": fmt.Sprint(batch)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	id := newIdentity(t)
	for s := range 20 {
		dump(s, nil)
	}
	for s := 20; s < 25; s++ {
		dump(s, &dlqdump.Encryption{Recipients: []envelope.Recipient{id.Recipient()}})
	}
	cc, other := &callCounter{Store: st}, &callCounter{Store: st}
	restorer := func(rd *callCounter) *dlqdump.Restorer {
		return newRestorer(t, dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: queueFunc(func(any) error { return nil }),
			Encryption: &dlqdump.Encryption{Identities: []envelope.Identity{id}}})
	}
	for i, c := range []struct {
		rd    *callCounter
		batch int
		opens int64
	}{
		{cc, 0, 25 + 1},    // the first plans every segment
		{cc, 1, 5 + 1},     // the second, over the same Reader: the encrypted ones only
		{other, 2, 23 + 1}, // over another Reader: every segment left
	} {
		r := restorer(c.rd)
		sel, err := selection.Parse(fmt.Sprintf("batch = %d", c.batch), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.rd.opens.Store(0)
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{Select: sel})
		if err != nil || rep.Delivered != 10 {
			t.Fatalf("Restorer %d: %+v, %v", i, rep, err)
		}
		if n := c.rd.opens.Load(); n != c.opens {
			t.Errorf("Restorer %d opened %d segments, want %d", i, n, c.opens)
		}
	}
}

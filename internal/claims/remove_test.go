package claims

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// removingStore is a store whose DeleteRecord would ask first whether the
// record is there, as S3's does, and which removes a record in one request
// too (sink.RecordRemover); it counts both, and runs before once, just
// before the first segment is deleted through it.
type removingStore struct {
	*memsink.Store
	deletes, removes atomic.Int64
	before           func()
}

func (s *removingStore) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	s.deletes.Add(1)
	return s.Store.DeleteRecord(ctx, name, ifVersion)
}

func (s *removingStore) RemoveRecord(ctx context.Context, name, ifVersion string) error {
	s.removes.Add(1)
	if err := s.Store.DeleteRecord(ctx, name, ifVersion); err != nil && !errors.Is(err, sink.ErrNotFound) {
		return err
	}
	return nil
}

func (s *removingStore) pause() {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
}

func (s *removingStore) Delete(ctx context.Context, area sink.Area, name string) error {
	s.pause()
	return s.Store.Delete(ctx, area, name)
}

func (s *removingStore) Discard(ctx context.Context, area sink.Area, names ...string) error {
	s.pause()
	return sink.Discard(ctx, s.Store, area, names...)
}

// A holder finishing within its lease removes the segment's record without
// asking first whether it is there (on S3 a HeadObject less): no one else
// can have removed it while the claim is trusted.
func TestFinishWhileTrustedRemovesTheRecordInOneCall(t *testing.T) {
	mem, clk := setup(t)
	st := &removingStore{Store: mem}
	ctx := t.Context()
	c := newClaimer(t, st, "a", clk)
	cl, err := c.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Finish(ctx, Destination{Delete: true}); err != nil {
		t.Fatal(err)
	}
	if d, r := st.deletes.Load(), st.removes.Load(); d != 0 || r != 1 {
		t.Fatalf("Finish made %d DeleteRecord and %d RemoveRecord calls, want 0 and 1", d, r)
	}
	if mem.Get(sink.AreaReady, "a.dlq") != nil {
		t.Fatal("the segment is still ready")
	}
	if _, _, err := mem.ReadRecord(ctx, "a.dlq"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("its record: %v, want it removed", err)
	}
}

// A holder that fenced its Finish (delete) and stopped past its lease before
// deleting the segment, while another took the claim over and completed
// that delete (removing the record too), learns that it lost the claim when
// it goes on: its claim is no longer trusted, so it asks whether the record
// is there (DeleteRecord) instead of removing it blindly, which would have
// succeeded on the missing record and counted the segment a second time.
func TestLateFinishAfterTakeoverAsksForTheRecord(t *testing.T) {
	mem, clk := setup(t)
	st := &removingStore{Store: mem}
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	b := newClaimer(t, mem, "b", clk)
	st.before = func() {
		if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
			t.Fatalf("first sight: %v, want ErrClaimed", err)
		}
		clk.Advance(lease)
		_, err := b.Claim(ctx, "a.dlq")
		var fin *Finished
		if !errors.As(err, &fin) || !fin.To.Delete || fin.Owner != "a" {
			t.Fatalf("a lease later: %v, want a *Finished completing a's delete", err)
		}
	}
	err = ca.Finish(ctx, Destination{Delete: true})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the stopped holder's Finish = %v, want ErrLeaseLost", err)
	}
	if st.removes.Load() != 0 {
		t.Fatalf("the stopped holder removed the record blindly (%d RemoveRecord calls)", st.removes.Load())
	}
}

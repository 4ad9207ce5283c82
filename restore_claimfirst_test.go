package dlqdump_test

import (
	"context"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// finishFirst is a directory whose first claim creation lets another
// restorer restore and finish everything first.
type finishFirst struct {
	*fs.Reader
	once  sync.Once
	other func()
}

func (s *finishFirst) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	if ifVersion == "" {
		s.once.Do(s.other)
	}
	return s.Reader.WriteRecord(ctx, name, data, ifVersion)
}

// A segment is opened only once its claim is taken. A restorer that listed
// a segment ready without a record and claims it after another restorer
// restored and finished it (deleted it, then its record) finds it gone and
// delivers nothing: its new record proves only that no claim was held when
// it was written, and the segment found after it, that no finish had
// removed it yet. Opening it while the claim was on its way (tried for
// issue 33, to save a round trip on S3) read it before the other's finish
// deleted it, and delivered it all again: 384 records of 16 of the 417
// segments twice in the fleet benchmark's directory column.
func TestSegmentOpenedOnlyAfterItsClaim(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("claimfirst", 300)
	dumpItems(t, dir, dlqdump.Config{}, items)
	first, second := &dest{}, &dest{}
	other := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: first, Owner: "first"})
	st := &finishFirst{Reader: &fs.Reader{Directory: dir}}
	st.other = func() {
		if _, err := other.Run(context.Background(), dlqdump.RunOptions{}); err != nil {
			t.Errorf("the other restorer: %v", err)
		}
	}
	late := newRestorer(t, dlqdump.Config{Reader: st, Queue: second, Owner: "late", SegmentsInFlight: 1})
	rep, err := late.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatalf("the late restorer: %+v, %v", rep, err)
	}
	if got := len(first.got()); got != len(items) {
		t.Fatalf("the other restorer delivered %d of %d records", got, len(items))
	}
	if got := second.got(); len(got) != 0 {
		t.Fatalf("the late restorer delivered %d records again (report %+v): it read the segment before its claim", len(got), rep)
	}
	for name, err := range sink.Names(t.Context(), st, sink.AreaReady) {
		t.Fatalf("left ready: %s, %v", name, err)
	}
	for name, err := range st.RecordNames(t.Context()) {
		t.Fatalf("a record left: %s, %v", name, err)
	}
}

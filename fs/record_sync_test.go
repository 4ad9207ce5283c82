package fs

import (
	"testing"
	"time"
)

// A Reader syncs the first write of each record it writes, then a write of
// it only once syncEvery passed since the last sync; a removed record starts
// again.
func TestRecordSyncSchedule(t *testing.T) {
	defer func(e time.Duration, s func(recordFile) error) { syncEvery, syncRecord = e, s }(syncEvery, syncRecord)
	syncs := 0
	syncRecord = func(f recordFile) error { syncs++; return syncRecordFile(f) }
	syncEvery = time.Hour
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	ctx := t.Context()
	a, b := newSegment(t, dir), newSegment(t, dir)
	va, err := rd.WriteRecord(ctx, a, []byte("a1"), "")
	if err != nil {
		t.Fatal(err)
	}
	if syncs != 1 {
		t.Fatalf("%d syncs after creating a record, want 1", syncs)
	}
	for i := range 5 {
		if va, err = rd.WriteRecord(ctx, a, []byte{'a', byte('2' + i)}, va); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rd.WriteRecord(ctx, b, []byte("b1"), ""); err != nil {
		t.Fatal(err)
	}
	if syncs != 2 {
		t.Fatalf("%d syncs after 5 more writes of one record within syncEvery and the first of another, want 2", syncs)
	}
	syncEvery = 0
	if va, err = rd.WriteRecord(ctx, a, []byte("a9"), va); err != nil {
		t.Fatal(err)
	}
	if syncs != 3 {
		t.Fatalf("%d syncs after a write later than syncEvery, want 3", syncs)
	}
	syncEvery = time.Hour
	if err := rd.DeleteRecord(ctx, a, va); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.WriteRecord(ctx, a, []byte("again"), ""); err != nil {
		t.Fatal(err)
	}
	if syncs != 4 {
		t.Fatalf("%d syncs after a record was removed and written anew, want 4", syncs)
	}
}

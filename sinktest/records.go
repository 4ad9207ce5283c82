package sinktest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/dlqdump/dlqdump/sink"
)

// The records: one per segment name, changed by compare-and-swap.

// recordData returns a record's bytes, different for every (i, j).
func recordData(i, j int) []byte {
	return fmt.Appendf(nil, `{"owner":"restorer-%d","rev":%d,"progress":{"offset":%d}}`, i, j, 64*j)
}

// readRecord returns a record and its version, failing on error.
func (s *suite) readRecord(name string) ([]byte, string) {
	s.Helper()
	data, version, err := s.s.Reader.ReadRecord(s.ctx, name)
	s.noErr(fmt.Sprintf("ReadRecord(%s)", name), err)
	if version == "" {
		s.Fatalf("ReadRecord(%s) returned an empty version", name)
	}
	return data, version
}

// writeRecord writes a record by compare-and-swap, failing on error, and
// returns the new version.
func (s *suite) writeRecord(name string, data []byte, ifVersion string) string {
	s.Helper()
	v, err := s.s.Reader.WriteRecord(s.ctx, name, data, ifVersion)
	s.noErr(fmt.Sprintf("WriteRecord(%s, if %q)", name, ifVersion), err)
	if v == "" {
		s.Fatalf("WriteRecord(%s) returned an empty version", name)
	}
	return v
}

// wantRecord fails unless the record of name holds data at version (any
// version if version is "").
func (s *suite) wantRecord(name string, data []byte, version string) {
	s.Helper()
	got, v := s.readRecord(name)
	if !bytes.Equal(got, data) {
		s.Fatalf("record %s holds %.60q, want %.60q", name, got, data)
	}
	if version != "" && v != version {
		s.Fatalf("record %s has version %q, want %q (the one its last write returned)", name, v, version)
	}
}

// wantNoRecord fails unless name has no record.
func (s *suite) wantNoRecord(name string) {
	s.Helper()
	_, _, err := s.s.Reader.ReadRecord(s.ctx, name)
	s.wantErr(fmt.Sprintf("ReadRecord(%s)", name), err, sink.ErrNotFound)
}

// wantRecordNames fails unless RecordNames returns exactly names, sorted.
func (s *suite) wantRecordNames(names ...string) {
	s.Helper()
	got := []string{}
	for n, err := range s.s.Reader.RecordNames(s.ctx) {
		s.noErr("RecordNames", err)
		got = append(got, n)
	}
	if names == nil {
		names = []string{}
	}
	if !slices.Equal(got, names) {
		s.Fatalf("RecordNames = %q, want %q", got, names)
	}
}

func testRecordCreate(s *suite) {
	n := name(1)
	s.wantNoRecord(n)
	v1 := s.writeRecord(n, recordData(1, 1), "")
	s.wantRecord(n, recordData(1, 1), v1)
	// Create when present: a conflict, nothing written.
	_, err := s.s.Reader.WriteRecord(s.ctx, n, recordData(2, 1), "")
	s.wantErr("WriteRecord(if absent) of an existing record", err, sink.ErrConflict)
	s.wantRecord(n, recordData(1, 1), v1)
	// Records are per name.
	m := name(2)
	s.wantNoRecord(m)
	vm := s.writeRecord(m, recordData(2, 1), "")
	s.wantRecord(m, recordData(2, 1), vm)
	s.wantRecord(n, recordData(1, 1), v1)
	// A one-byte record.
	o := name(3)
	vo := s.writeRecord(o, []byte("x"), "")
	s.wantRecord(o, []byte("x"), vo)
	s.wantRecordNames(n, m, o)
}

func testRecordCAS(s *suite) {
	n := name(1)
	v1 := s.writeRecord(n, recordData(1, 1), "")
	v2 := s.writeRecord(n, recordData(1, 2), v1)
	if v2 == v1 {
		s.Fatalf("WriteRecord of other bytes returned the version it replaced, %q", v1)
	}
	s.wantRecord(n, recordData(1, 2), v2)
	// A stale version: a conflict, nothing written.
	_, err := s.s.Reader.WriteRecord(s.ctx, n, recordData(2, 3), v1)
	s.wantErr("WriteRecord with a stale version", err, sink.ErrConflict)
	s.wantRecord(n, recordData(1, 2), v2)
	_, err = s.s.Reader.WriteRecord(s.ctx, n, recordData(2, 3), `"not-a-version-the-sink-gave"`)
	s.wantErr("WriteRecord with a made-up version", err, sink.ErrConflict)
	s.wantRecord(n, recordData(1, 2), v2)
	// A chain of writes, each on the version the last one returned.
	v := v2
	seen := map[string]bool{v1: true, v2: true}
	for j := 3; j < 10; j++ {
		v = s.writeRecord(n, recordData(1, j), v)
		if seen[v] {
			s.Fatalf("write %d returned version %q, already returned for other bytes", j, v)
		}
		seen[v] = true
		s.wantRecord(n, recordData(1, j), v)
	}
	// A version of a record that is gone: a conflict, nothing written.
	m := name(2)
	vm := s.writeRecord(m, recordData(3, 1), "")
	s.deleteRecord(m, vm)
	_, err = s.s.Reader.WriteRecord(s.ctx, m, recordData(3, 2), vm)
	s.wantErr("WriteRecord with the version of a deleted record", err, sink.ErrConflict)
	s.wantNoRecord(m)
	_, err = s.s.Reader.WriteRecord(s.ctx, m, recordData(3, 2), v)
	s.wantErr("WriteRecord of a missing record with another record's version", err, sink.ErrConflict)
	s.wantNoRecord(m)
	s.wantRecordNames(n)
}

// deleteRecord deletes a record, failing on error.
func (s *suite) deleteRecord(name, version string) {
	s.Helper()
	s.noErr(fmt.Sprintf("DeleteRecord(%s, if %q)", name, version), s.s.Reader.DeleteRecord(s.ctx, name, version))
}

func testRecordDelete(s *suite) {
	n := name(1)
	s.wantErr("DeleteRecord of a missing record", s.s.Reader.DeleteRecord(s.ctx, n, "some-version"), sink.ErrNotFound)
	v1 := s.writeRecord(n, recordData(1, 1), "")
	v2 := s.writeRecord(n, recordData(1, 2), v1)
	err := s.s.Reader.DeleteRecord(s.ctx, n, v1)
	switch {
	case errors.Is(err, sink.ErrConflict):
		s.wantRecord(n, recordData(1, 2), v2)
	case s.opts.DeleteRecordUnconditional && err == nil:
		s.wantNoRecord(n) // removed whatever its version, as documented
		v2 = s.writeRecord(n, recordData(1, 2), "")
	default:
		s.Fatalf("DeleteRecord with a stale version = %v, want an error wrapping %v (see Options.DeleteRecordUnconditional)", err, sink.ErrConflict)
	}
	s.deleteRecord(n, v2)
	s.wantNoRecord(n)
	s.wantErr("DeleteRecord again", s.s.Reader.DeleteRecord(s.ctx, n, v2), sink.ErrNotFound)
	s.wantRecordNames()
	// The name can have a record again, created as new.
	_, err = s.s.Reader.WriteRecord(s.ctx, n, recordData(1, 3), v2)
	s.wantErr("WriteRecord with a deleted record's version", err, sink.ErrConflict)
	v3 := s.writeRecord(n, recordData(1, 3), "")
	s.wantRecord(n, recordData(1, 3), v3)
	s.wantRecordNames(n)
}

func testRecordNames(s *suite) {
	s.wantRecordNames()
	var names []string
	for i := range 40 {
		names = append(names, name(i))
	}
	// Segments without records are not record names.
	ready, quarantined := name(100), name(101)
	s.write(ready, payload(1))
	s.create(sink.AreaQuarantine, quarantined, payload(2))
	versions := map[string]string{}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, i := range rng.Perm(len(names)) {
		versions[names[i]] = s.writeRecord(names[i], recordData(i, 1), "")
	}
	s.wantRecordNames(names...)
	// Deleted records are not listed; rewritten ones once.
	s.deleteRecord(names[7], versions[names[7]])
	s.writeRecord(names[8], recordData(8, 2), versions[names[8]])
	want := slices.Delete(slices.Clone(names), 7, 8)
	s.wantRecordNames(want...)
	// Stopping early is allowed.
	seen := 0
	for _, err := range s.s.Reader.RecordNames(s.ctx) {
		s.noErr("RecordNames", err)
		if seen++; seen == 5 {
			break
		}
	}
	if seen != 5 {
		s.Fatalf("iterated %d record names before stopping, want 5", seen)
	}
	// Records are not segments.
	s.wantOnly(sink.AreaReady, ready)
	s.wantOnly(sink.AreaQuarantine, quarantined)
	s.wantOnly(sink.AreaArchive)
}

// A record belongs to a name, not to a segment in an area: moving or
// deleting the segment leaves it, and a name without a segment can have one.
func testRecordsIndependent(s *suite) {
	n, lone := name(1), name(2)
	s.write(n, payload(1))
	v := s.writeRecord(n, recordData(1, 1), "")
	s.move(n, sink.AreaReady, sink.AreaQuarantine, "why")
	s.wantRecord(n, recordData(1, 1), v)
	v = s.writeRecord(n, recordData(1, 2), v)
	s.move(n, sink.AreaQuarantine, sink.AreaArchive, "")
	s.wantRecord(n, recordData(1, 2), v)
	s.move(n, sink.AreaArchive, sink.AreaReady, "")
	s.wantRecord(n, recordData(1, 2), v)
	s.noErr("Delete", s.s.Reader.Delete(s.ctx, sink.AreaReady, n))
	s.wantRecord(n, recordData(1, 2), v)
	vl := s.writeRecord(lone, recordData(2, 1), "")
	s.wantRecord(lone, recordData(2, 1), vl)
	s.wantRecordNames(n, lone)
	// Deleting a record leaves the segment.
	s.write(n, payload(3))
	s.deleteRecord(n, v)
	s.wantContent(sink.AreaReady, n, payload(3))
	for _, a := range areas {
		s.wantMissing(a, lone)
	}
}

// A record of sink.MaxRecordSize bytes round-trips; a larger one is refused,
// leaving the record as it was.
func testRecordMaxSize(s *suite) {
	n := name(1)
	big := make([]byte, sink.MaxRecordSize)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	v := s.writeRecord(n, big, "")
	s.wantRecord(n, big, v)
	tooBig := append(slices.Clone(big), 'x')
	if _, err := s.s.Reader.WriteRecord(s.ctx, n, tooBig, v); err == nil {
		s.Fatalf("WriteRecord of %d bytes succeeded; the limit is %d", len(tooBig), sink.MaxRecordSize)
	}
	s.wantRecord(n, big, v)
	m := name(2)
	if _, err := s.s.Reader.WriteRecord(s.ctx, m, tooBig, ""); err == nil {
		s.Fatalf("WriteRecord of a new record of %d bytes succeeded; the limit is %d", len(tooBig), sink.MaxRecordSize)
	}
	s.wantNoRecord(m)
	v = s.writeRecord(n, []byte("small again"), v)
	s.wantRecord(n, []byte("small again"), v)
}

// Concurrent compare-and-swaps of one record on the same version: exactly
// one wins per version, the others get sink.ErrConflict, and the record holds
// the winner's bytes at the version it was given. Writers of different names
// do not conflict.
func testRecordConcurrentCAS(s *suite) {
	const racers, rounds = 8, 4
	n := name(1)
	version := ""
	for round := range rounds {
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			mu     sync.Mutex
			won    []int
			wonAt  string
			others []error
		)
		for g := range racers {
			wg.Go(func() {
				<-start
				v, err := s.s.Reader.WriteRecord(s.ctx, n, recordData(g, round), version)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won, wonAt = append(won, g), v
				case !errors.Is(err, sink.ErrConflict):
					others = append(others, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(others) > 0 {
			s.Fatalf("round %d: WriteRecord failed with errors other than ErrConflict: %v", round, others)
		}
		if len(won) != 1 {
			s.Fatalf("round %d: %d of %d concurrent writes on version %q won (racers %v), want exactly 1", round, len(won), racers, version, won)
		}
		s.wantRecord(n, recordData(won[0], round), wonAt)
		version = wonAt
	}

	// One name each: no conflicts.
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	own := make([]string, racers)
	for g := range racers {
		m := name(10 + g)
		own[g] = m
		wg.Go(func() {
			v := ""
			for j := range 5 {
				var err error
				if v, err = s.s.Reader.WriteRecord(s.ctx, m, recordData(g, j), v); err != nil {
					errs <- fmt.Errorf("writer of %s, write %d: %w", m, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		s.Error(err)
	}
	if s.Failed() {
		s.FailNow()
	}
	for g := range racers {
		s.wantRecord(own[g], recordData(g, 4), "")
	}
}

// Package sinktest is a conformance suite for dlqdump sinks: a sink.Writer
// and the sink.Reader over the same store. Every sink runs it from its tests:
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) sinktest.Store {
//			dir := t.TempDir()
//			return sinktest.Store{Writer: &fs.Writer{Directory: dir}, Reader: &fs.Reader{Directory: dir}}
//		})
//	}
//
// It tests the primitives of package sink, the ones the claim protocol and
// the Restorer are built on (those are tested once, above the sinks):
// publishing (Writer and Reader.Create), listing, reading, Move, Delete, the
// staging area and Unstage, the compare-and-swap records and the tables of
// records (sink.Tables). Besides what the interfaces document, the
// suite requires:
//
//   - File.ReadAt follows io.ReaderAt, returning io.EOF with a short read
//     at the end of the segment, and is safe for concurrent use.
//   - A Commit that is refused leaves the segment already there as it was,
//     reason included, and a refused Move leaves both segments as they
//     were. A Commit of the very bytes already stored under the name may
//     succeed instead of failing with sink.ErrExist: a sink cannot always
//     tell it from its own retried Commit.
//   - A Writer's Commit never replaces a segment either, whatever error it
//     returns (a sink may publish the newcomer under another name).
//   - A record's version is not empty and changes with every write of
//     other bytes.
//
// Records written by the suite are 1 to sink.MaxRecordSize bytes long; an
// empty record is never written. Sync is not tested: whether bytes survive a
// crash cannot be observed through the interfaces. Neither is a Move within
// one area.
package sinktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Store is one sink under test: a Writer and a Reader over the same, empty
// store.
type Store struct {
	Writer sink.Writer
	Reader sink.Reader
}

// Options tune the suite to what a sink documents.
type Options struct {
	// DeleteRecordUnconditional says that the sink's DeleteRecord removes a
	// record whatever its version, because its store cannot make a delete
	// conditional (S3 servers that ignore If-Match on DELETE), as the sink
	// documents. The suite then accepts, for a stale version, either
	// sink.ErrConflict with the record kept or success with the record
	// removed; by default it requires the former.
	DeleteRecordUnconditional bool
}

// Run runs every conformance test against stores made by newStore, a fresh
// empty store per test. The tests run one after another.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	RunWithOptions(t, newStore, Options{})
}

// RunWithOptions is Run with options.
func RunWithOptions(t *testing.T, newStore func(t *testing.T) Store, opts Options) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if s.Writer == nil || s.Reader == nil {
				t.Fatal("newStore returned a Store without a Writer or Reader")
			}
			tc.f(&suite{T: t, s: s, opts: opts, ctx: t.Context()})
		})
	}
}

// tests are the conformance tests, by concern: segments.go (publishing,
// listing and reading), areas.go (Reader.Create, Move, Delete), records.go.
var tests = []struct {
	name string
	f    func(*suite)
}{
	{"WriterCommitIsAtomic", testCommitAtomic},
	{"WriterAbortLeavesNothing", testAbort},
	{"WriterTruncateAndRewrite", testTruncate},
	{"WriterNeverReplaces", testWriterNeverReplaces},
	{"ListOldestFirst", testListOrder},
	{"ListMany", testListMany},
	{"SegmentRoundTrip", testRoundTrip},
	{"ReadAt", testReadAt},
	{"NotFound", testNotFound},

	{"CreateInAreas", testCreateInAreas},
	{"CreateRefusesExisting", testCreateRefusesExisting},
	{"MoveBetweenAreas", testMove},
	{"MoveRefusesToReplace", testMoveRefuses},
	{"MoveAfterMove", testMoveAfterMove},
	{"Delete", testDelete},
	{"Unstage", testUnstage},
	{"UnstageRefusesToReplace", testUnstageRefuses},

	{"RecordCreateIfAbsent", testRecordCreate},
	{"RecordCompareAndSwap", testRecordCAS},
	{"RecordDelete", testRecordDelete},
	{"RecordNames", testRecordNames},
	{"RecordsIndependentOfAreas", testRecordsIndependent},
	{"RecordMaxSize", testRecordMaxSize},
	{"RecordConcurrentCAS", testRecordConcurrentCAS},
	{"Tables", testTables},
}

// areas are the three areas, in order.
var areas = []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive}

// suite is one test's state and helpers.
type suite struct {
	*testing.T
	s    Store
	opts Options
	ctx  context.Context
}

// nameBase is the creation time of name(0).
var nameBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// name returns a segment name made by segment.FileName for a time i seconds
// after a fixed base: names sort by i.
func name(i int) string {
	t := nameBase.Add(time.Duration(i) * time.Second)
	return segment.FileName(t, segment.NewID(t))
}

// payload returns bytes that differ with i, in content and mostly in size.
func payload(i int) []byte {
	return fmt.Appendf(nil, "segment bytes %d: %s", i, bytes.Repeat([]byte{byte('a' + i%26)}, i%97))
}

// write stores data as a committed segment through the Writer.
func (s *suite) write(name string, data []byte) {
	s.Helper()
	sw, err := s.s.Writer.Create(s.ctx, name)
	if err != nil {
		s.Fatalf("Writer.Create(%s): %v", name, err)
	}
	s.commit(sw, name, data)
}

// create stores data as a committed segment in an area through the Reader.
func (s *suite) create(area sink.Area, name string, data []byte) {
	s.Helper()
	sw, err := s.s.Reader.Create(s.ctx, area, name)
	if err != nil {
		s.Fatalf("Reader.Create(%s, %s): %v", area, name, err)
	}
	s.commit(sw, name, data)
}

func (s *suite) commit(sw sink.SegmentWriter, name string, data []byte) {
	s.Helper()
	s.writeAll(sw, name, data)
	if err := sw.Commit(s.ctx); err != nil {
		s.Fatalf("Commit(%s): %v", name, err)
	}
}

func (s *suite) writeAll(sw sink.SegmentWriter, name string, data []byte) {
	s.Helper()
	if n, err := sw.Write(data); err != nil || n != len(data) {
		s.Fatalf("Write(%s) = %d, %v; want %d, nil", name, n, err, len(data))
	}
}

// move moves a segment, failing on error.
func (s *suite) move(name string, from, to sink.Area, reason string) {
	s.Helper()
	s.noErr(fmt.Sprintf("Move(%s from %s to %s)", name, from, to), s.s.Reader.Move(s.ctx, name, from, to, reason))
}

// list returns an area's segments, failing on error.
func (s *suite) list(area sink.Area) []sink.Info {
	s.Helper()
	var out []sink.Info
	for si, err := range s.s.Reader.List(s.ctx, area) {
		if err != nil {
			s.Fatalf("List(%s): %v", area, err)
		}
		out = append(out, si)
	}
	return out
}

// names returns the names in an area, in listed order.
func (s *suite) names(area sink.Area) []string {
	s.Helper()
	out := []string{}
	for _, si := range s.list(area) {
		out = append(out, si.Name)
	}
	return out
}

// find returns the segment's info in an area; ok is false if it is not
// listed.
func (s *suite) find(area sink.Area, name string) (sink.Info, bool) {
	s.Helper()
	for _, si := range s.list(area) {
		if si.Name == name {
			return si, true
		}
	}
	return sink.Info{}, false
}

// info returns the segment's info in an area, failing if it is not listed.
func (s *suite) info(area sink.Area, name string) sink.Info {
	s.Helper()
	si, ok := s.find(area, name)
	if !ok {
		s.Fatalf("%s is not listed in %s (listed: %q)", name, area, s.names(area))
	}
	return si
}

// wantReason fails unless the quarantined segment is listed with reason.
func (s *suite) wantReason(name, reason string) {
	s.Helper()
	if got := s.info(sink.AreaQuarantine, name).Reason; got != reason {
		s.Fatalf("quarantined %s has reason %q, want %q", name, got, reason)
	}
}

// wantOnly fails unless the area holds exactly the named segments.
func (s *suite) wantOnly(area sink.Area, names ...string) {
	s.Helper()
	if names == nil {
		names = []string{}
	}
	if got := s.names(area); !slices.Equal(got, names) {
		s.Fatalf("List(%s) = %q, want %q", area, got, names)
	}
}

// read returns a segment's bytes through Open and ReadAt.
func (s *suite) read(area sink.Area, name string) []byte {
	s.Helper()
	f, err := s.s.Reader.Open(s.ctx, area, name)
	if err != nil {
		s.Fatalf("Open(%s, %s): %v", area, name, err)
	}
	defer f.Close()
	b := make([]byte, f.Size())
	if n, err := f.ReadAt(b, 0); n != len(b) || err != nil && !errors.Is(err, io.EOF) {
		s.Fatalf("ReadAt(%s, 0) of the whole segment = %d, %v; want %d, nil", name, n, err, len(b))
	}
	return b
}

// wantContent fails unless the segment holds data.
func (s *suite) wantContent(area sink.Area, name string, data []byte) {
	s.Helper()
	if got := s.read(area, name); !bytes.Equal(got, data) {
		s.Fatalf("%s segment %s holds %d bytes %.40q, want %d bytes %.40q", area, name, len(got), got, len(data), data)
	}
}

// wantMissing fails unless Open of the segment fails with sink.ErrNotFound.
func (s *suite) wantMissing(area sink.Area, name string) {
	s.Helper()
	_, err := s.s.Reader.Open(s.ctx, area, name)
	s.wantErr(fmt.Sprintf("Open(%s, %s)", area, name), err, sink.ErrNotFound)
}

// wantErr fails unless err wraps target.
func (s *suite) wantErr(what string, err, target error) {
	s.Helper()
	if !errors.Is(err, target) {
		s.Fatalf("%s = %v, want an error wrapping %v", what, err, target)
	}
}

func (s *suite) noErr(what string, err error) {
	s.Helper()
	if err != nil {
		s.Fatalf("%s: %v", what, err)
	}
}

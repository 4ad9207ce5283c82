// Package sinktest is a conformance suite for dlqdump sinks: a
// dlqdump.Writer and the dlqdump.Reader over the same store. Every sink runs
// it from its tests:
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) sinktest.Store {
//			dir := t.TempDir()
//			return sinktest.Store{Writer: &fs.Writer{Directory: dir}, Reader: &fs.Reader{Directory: dir}}
//		})
//	}
//
// Besides what the interfaces document, the suite requires:
//
//   - Claim methods called after Release, Complete or Quarantine succeeded
//     fail with an error wrapping dlqdump.ErrClosed; those of a claim taken
//     over fail with one wrapping dlqdump.ErrLeaseLost.
//   - Claiming a segment whose live claim has the same owner takes it over:
//     claims are told apart by more than the owner's name.
//   - SegmentFile.ReadAt follows io.ReaderAt, returning io.EOF with a short
//     read at the end of the segment.
//   - List returns a ready segment's claim with its last renewed checkpoint,
//     and a released claim, if at all, with an expiry not in the future.
//
// Sync is not tested: whether bytes survive a crash cannot be observed
// through the interfaces.
package sinktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
)

// Store is one sink under test: a Writer and a Reader over the same, empty
// store.
type Store struct {
	Writer dlqdump.Writer
	Reader dlqdump.Reader
}

// Options tune the suite.
type Options struct {
	// Lease is the lease of the claims whose expiry is tested; those tests
	// sleep Lease and a half. Default 200ms. A sink whose claims take a good
	// part of that (a remote store) should set more. Claims that must not
	// expire during a test get a minute.
	Lease time.Duration
}

// Run runs every conformance test against stores made by newStore, a fresh
// empty store per test. The tests run one after another.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	RunWithOptions(t, newStore, Options{})
}

// RunWithOptions is Run with options.
func RunWithOptions(t *testing.T, newStore func(t *testing.T) Store, opts Options) {
	if opts.Lease <= 0 {
		opts.Lease = 200 * time.Millisecond
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if s.Writer == nil || s.Reader == nil {
				t.Fatal("newStore returned a Store without a Writer or Reader")
			}
			tc.f(&suite{T: t, s: s, lease: opts.Lease, ctx: t.Context()})
		})
	}
}

// longLease is the lease of claims that must stay live during a test.
const longLease = time.Minute

var tests = []struct {
	name string
	f    func(*suite)
}{
	{"WriterCommitIsAtomic", testCommitAtomic},
	{"WriterAbortLeavesNothing", testAbort},
	{"WriterTruncateAndRewrite", testTruncate},
	{"ListOldestFirst", testListOrder},
	{"ListMany", testListMany},
	{"SegmentRoundTrip", testRoundTrip},
	{"ReadAt", testReadAt},
	{"NotFound", testNotFound},
	{"ClaimExclusive", testClaimExclusive},
	{"ClaimConcurrent", testClaimConcurrent},
	{"LeaseExpiryTakeover", testLeaseExpiry},
	{"SameOwnerClaimsTwice", testSameOwner},
	{"ReleaseThenResume", testRelease},
	{"CompleteDeletes", testCompleteDelete},
	{"CompleteArchives", testCompleteArchive},
	{"ClaimQuarantine", testClaimQuarantine},
	{"MoveBetweenAreas", testMove},
	{"MoveClaimedRefused", testMoveClaimed},
	{"Delete", testDelete},
	{"CreateInAreas", testCreateInAreas},
}

// suite is one test's state and helpers.
type suite struct {
	*testing.T
	s     Store
	lease time.Duration
	ctx   context.Context
}

var (
	nameMu   sync.Mutex
	nameBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// name returns a segment name made by segment.FileName for a time i seconds
// after a fixed base: names sort by i.
func name(i int) string {
	t := nameBase.Add(time.Duration(i) * time.Second)
	nameMu.Lock()
	defer nameMu.Unlock()
	return segment.FileName(t, segment.NewID(t))
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
func (s *suite) create(area dlqdump.Area, name string, data []byte) {
	s.Helper()
	sw, err := s.s.Reader.Create(s.ctx, area, name)
	if err != nil {
		s.Fatalf("Reader.Create(%s, %s): %v", area, name, err)
	}
	s.commit(sw, name, data)
}

func (s *suite) commit(sw dlqdump.SegmentWriter, name string, data []byte) {
	s.Helper()
	if n, err := sw.Write(data); err != nil || n != len(data) {
		s.Fatalf("Write(%s) = %d, %v; want %d, nil", name, n, err, len(data))
	}
	if err := sw.Commit(s.ctx); err != nil {
		s.Fatalf("Commit(%s): %v", name, err)
	}
}

// list returns an area's segments, failing on error.
func (s *suite) list(area dlqdump.Area) []dlqdump.SegmentInfo {
	s.Helper()
	var out []dlqdump.SegmentInfo
	for si, err := range s.s.Reader.List(s.ctx, area) {
		if err != nil {
			s.Fatalf("List(%s): %v", area, err)
		}
		out = append(out, si)
	}
	return out
}

// names returns the names in an area, in listed order.
func (s *suite) names(area dlqdump.Area) []string {
	s.Helper()
	var out []string
	for _, si := range s.list(area) {
		out = append(out, si.Name)
	}
	return out
}

// find returns the segment's info in an area; ok is false if it is not
// listed.
func (s *suite) find(area dlqdump.Area, name string) (dlqdump.SegmentInfo, bool) {
	s.Helper()
	for _, si := range s.list(area) {
		if si.Name == name {
			return si, true
		}
	}
	return dlqdump.SegmentInfo{}, false
}

// wantOnly fails unless the area holds exactly the named segments.
func (s *suite) wantOnly(area dlqdump.Area, names ...string) {
	s.Helper()
	got := s.names(area)
	if names == nil {
		names = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, names) {
		s.Fatalf("List(%s) = %q, want %q", area, got, names)
	}
}

// read returns a segment's bytes through Open and ReadAt.
func (s *suite) read(area dlqdump.Area, name string) []byte {
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
func (s *suite) wantContent(area dlqdump.Area, name string, data []byte) {
	s.Helper()
	if got := s.read(area, name); !bytes.Equal(got, data) {
		s.Fatalf("%s segment %s holds %d bytes %.40q, want %d bytes %.40q", area, name, len(got), got, len(data), data)
	}
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

// claim claims a segment, failing on error.
func (s *suite) claim(name, owner string, lease time.Duration) dlqdump.Claim {
	s.Helper()
	c, err := s.s.Reader.Claim(s.ctx, name, owner, lease)
	if err != nil {
		s.Fatalf("Claim(%s, %s): %v", name, owner, err)
	}
	if c.Name() != name {
		s.Fatalf("Claim(%s).Name() = %q", name, c.Name())
	}
	return c
}

// wantEnded checks that every method of an ended claim fails with target.
func (s *suite) wantEnded(c dlqdump.Claim, target error) {
	s.Helper()
	s.wantErr("Renew of an ended claim", c.Renew(s.ctx, dlqdump.Checkpoint{Delivered: 999}), target)
	s.wantErr("Release of an ended claim", c.Release(s.ctx), target)
	s.wantErr("Complete of an ended claim", c.Complete(s.ctx, false), target)
	s.wantErr("Quarantine of an ended claim", c.Quarantine(s.ctx, "late"), target)
}

func payload(i int) []byte {
	return fmt.Appendf(nil, "segment bytes %d: %s", i, bytes.Repeat([]byte{byte('a' + i%26)}, i%97))
}

func cp(offset int64, seq, delivered, quarantined uint64) dlqdump.Checkpoint {
	return dlqdump.Checkpoint{Position: segment.Position{Offset: offset, Seq: seq}, Delivered: delivered, Quarantined: quarantined}
}

func testCommitAtomic(s *suite) {
	n := name(1)
	sw, err := s.s.Writer.Create(s.ctx, n)
	s.noErr("Writer.Create", err)
	if _, err := sw.Write([]byte("first half, ")); err != nil {
		s.Fatal(err)
	}
	s.wantOnly(dlqdump.AreaReady)
	_, err = s.s.Reader.Open(s.ctx, dlqdump.AreaReady, n)
	s.wantErr("Open of a segment not yet committed", err, dlqdump.ErrNotFound)
	_, err = s.s.Reader.Claim(s.ctx, n, "owner", longLease)
	s.wantErr("Claim of a segment not yet committed", err, dlqdump.ErrNotFound)
	if _, err := sw.Write([]byte("second half")); err != nil {
		s.Fatal(err)
	}
	s.wantOnly(dlqdump.AreaReady)
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantOnly(dlqdump.AreaReady, n)
	s.wantContent(dlqdump.AreaReady, n, []byte("first half, second half"))
	si, _ := s.find(dlqdump.AreaReady, n)
	if si.Size != int64(len("first half, second half")) || si.Area != dlqdump.AreaReady || si.Claim != nil || si.Reason != "" {
		s.Fatalf("SegmentInfo = %+v, want size 23 in ready, no claim, no reason", si)
	}
	if si.Modified.IsZero() {
		s.Fatal("SegmentInfo.Modified is zero")
	}
	s.wantOnly(dlqdump.AreaQuarantine)
	s.wantOnly(dlqdump.AreaArchive)
}

func testAbort(s *suite) {
	a, b := name(1), name(2)
	swa, err := s.s.Writer.Create(s.ctx, a)
	s.noErr("Writer.Create", err)
	swb, err := s.s.Writer.Create(s.ctx, b)
	s.noErr("Writer.Create", err)
	for _, sw := range []dlqdump.SegmentWriter{swa, swb} {
		if _, err := sw.Write(payload(7)); err != nil {
			s.Fatal(err)
		}
	}
	s.noErr("Abort", swa.Abort())
	s.noErr("Commit", swb.Commit(s.ctx))
	s.wantOnly(dlqdump.AreaReady, b)
	_, err = s.s.Reader.Open(s.ctx, dlqdump.AreaReady, a)
	s.wantErr("Open of an aborted segment", err, dlqdump.ErrNotFound)
	// The name is free again.
	s.write(a, payload(3))
	s.wantOnly(dlqdump.AreaReady, a, b)
	s.wantContent(dlqdump.AreaReady, a, payload(3))
}

func testTruncate(s *suite) {
	n := name(1)
	sw, err := s.s.Writer.Create(s.ctx, n)
	s.noErr("Writer.Create", err)
	for _, step := range []struct {
		write    string
		truncate int64
	}{
		{"hello world", 5}, {", there; and a failed write", 12}, {"!", -1},
	} {
		if _, err := sw.Write([]byte(step.write)); err != nil {
			s.Fatal(err)
		}
		if step.truncate >= 0 {
			s.noErr("Truncate", sw.Truncate(step.truncate))
		}
	}
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantContent(dlqdump.AreaReady, n, []byte("hello, there!"))

	// Truncate to zero starts over.
	m := name(2)
	sw, err = s.s.Writer.Create(s.ctx, m)
	s.noErr("Writer.Create", err)
	if _, err := sw.Write([]byte("garbage")); err != nil {
		s.Fatal(err)
	}
	s.noErr("Truncate", sw.Truncate(0))
	if _, err := sw.Write([]byte("clean")); err != nil {
		s.Fatal(err)
	}
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantContent(dlqdump.AreaReady, m, []byte("clean"))
	if si, _ := s.find(dlqdump.AreaReady, m); si.Size != 5 {
		s.Fatalf("Size = %d after truncating and rewriting, want 5", si.Size)
	}
}

func testListOrder(s *suite) {
	var want []string
	for i := range 6 {
		want = append(want, name(i*60))
	}
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		s.write(want[i], payload(i))
	}
	s.wantOnly(dlqdump.AreaReady, want...)
	for i, si := range s.list(dlqdump.AreaReady) {
		created, ok := segment.ParseFileName(si.Name)
		if !ok || !created.Equal(nameBase.Add(time.Duration(i)*time.Minute)) {
			s.Fatalf("segment %d is %s (created %v), want the one created at %v", i, si.Name, created, nameBase.Add(time.Duration(i)*time.Minute))
		}
	}
}

func testListMany(s *suite) {
	const n = 300
	want := make([]string, n)
	data := map[string][]byte{}
	for i := range want {
		want[i] = name(i)
		data[want[i]] = payload(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, i := range rng.Perm(n) {
		s.write(want[i], data[want[i]])
	}
	// A few elsewhere, which must not show up in ready.
	q := []string{name(-3), name(n + 3)}
	for _, m := range q {
		s.create(dlqdump.AreaQuarantine, m, payload(1))
	}
	got := s.list(dlqdump.AreaReady)
	if len(got) != n {
		s.Fatalf("List(ready) returned %d segments, want %d", len(got), n)
	}
	for i, si := range got {
		if si.Name != want[i] {
			s.Fatalf("segment %d is %s, want %s", i, si.Name, want[i])
		}
		if si.Size != int64(len(data[si.Name])) {
			s.Fatalf("%s: Size %d, want %d", si.Name, si.Size, len(data[si.Name]))
		}
		if si.Area != dlqdump.AreaReady {
			s.Fatalf("%s: Area %v in List(ready)", si.Name, si.Area)
		}
	}
	s.wantOnly(dlqdump.AreaQuarantine, q...)
	// Stopping early is allowed.
	seen := 0
	for _, err := range s.s.Reader.List(s.ctx, dlqdump.AreaReady) {
		s.noErr("List", err)
		if seen++; seen == 10 {
			break
		}
	}
	if seen != 10 {
		s.Fatalf("iterated %d segments before stopping, want 10", seen)
	}
}

// rec is a record to write and compare.
type rec struct {
	t       time.Time
	headers map[string]string
	payload []byte
}

func testRoundTrip(s *suite) {
	rng := rand.New(rand.NewPCG(3, 4))
	created := nameBase.Add(time.Hour)
	hdr := segment.Header{Codec: segment.CodecZstd, DataVersion: 42, Created: created, ID: segment.NewID(created)}
	n := segment.FileName(hdr.Created, hdr.ID)
	recs := make([]rec, 600)
	for i := range recs {
		p := make([]byte, rng.IntN(2000))
		for j := range p {
			p[j] = byte(rng.IntN(8)) // compressible, not trivially
		}
		r := rec{t: created.Add(time.Duration(i) * time.Millisecond), payload: p}
		if i%3 != 0 {
			r.headers = map[string]string{"source": "sinktest", "i": fmt.Sprint(i)}
		}
		recs[i] = r
	}
	sw, err := s.s.Writer.Create(s.ctx, n)
	s.noErr("Writer.Create", err)
	w, err := segment.NewWriter(sw, hdr, &segment.WriterOptions{BlockSize: 16 << 10})
	s.noErr("segment.NewWriter", err)
	for _, r := range recs {
		s.noErr("segment.Writer.Add", w.Add(r.t, r.headers, r.payload))
	}
	s.noErr("segment.Writer.Close", w.Close())
	s.noErr("Commit", sw.Commit(s.ctx))
	if w.Blocks() < 2 {
		s.Fatalf("wrote %d blocks; the test wants several", w.Blocks())
	}

	si, ok := s.find(dlqdump.AreaReady, n)
	if !ok || si.Size != w.Size() {
		s.Fatalf("List: %+v (listed %v), want size %d", si, ok, w.Size())
	}
	f, err := s.s.Reader.Open(s.ctx, dlqdump.AreaReady, n)
	s.noErr("Open", err)
	defer f.Close()
	if f.Size() != w.Size() {
		s.Fatalf("SegmentFile.Size() = %d, want %d", f.Size(), w.Size())
	}
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: n})
	s.noErr("segment.NewReader", err)
	if !sr.Sealed() || sr.Footer().Records != uint64(len(recs)) {
		s.Fatalf("read back: sealed %v, footer %+v, want %d records", sr.Sealed(), sr.Footer(), len(recs))
	}
	if h := sr.Header(); h.DataVersion != 42 || h.ID != hdr.ID || !h.Created.Equal(created) {
		s.Fatalf("header read back = %+v, want %+v", h, hdr)
	}
	for i := 0; ; i++ {
		got, err := sr.Next()
		if errors.Is(err, io.EOF) {
			if i != len(recs) {
				s.Fatalf("read back %d records, want %d", i, len(recs))
			}
			break
		}
		s.noErr("segment.Reader.Next", err)
		if i >= len(recs) {
			s.Fatalf("read back more than %d records", len(recs))
		}
		want := recs[i]
		if got.Seq != uint64(i) || got.Time != want.t.UnixNano() || !bytes.Equal(got.Payload, want.payload) || !mapsEqual(got.Headers.Map(), want.headers) {
			s.Fatalf("record %d = seq %d time %d headers %v payload %d bytes; want time %d headers %v payload %d bytes",
				i, got.Seq, got.Time, got.Headers.Map(), len(got.Payload), want.t.UnixNano(), want.headers, len(want.payload))
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func testReadAt(s *suite) {
	n := name(1)
	data := []byte("0123456789abcdefghij")
	s.write(n, data)
	f, err := s.s.Reader.Open(s.ctx, dlqdump.AreaReady, n)
	s.noErr("Open", err)
	defer f.Close()
	if f.Size() != int64(len(data)) {
		s.Fatalf("Size() = %d, want %d", f.Size(), len(data))
	}
	buf := make([]byte, 5)
	if k, err := f.ReadAt(buf, 7); k != 5 || err != nil && !errors.Is(err, io.EOF) || string(buf) != "789ab" {
		s.Fatalf("ReadAt(5 bytes, 7) = %d, %v, %q; want 5, nil, 789ab", k, err, buf)
	}
	buf = make([]byte, 10)
	if k, err := f.ReadAt(buf, 15); k != 5 || !errors.Is(err, io.EOF) || string(buf[:k]) != "fghij" {
		s.Fatalf("ReadAt(10 bytes, 15) of 20 = %d, %v, %q; want 5, io.EOF, fghij", k, err, buf[:k])
	}
	if k, err := f.ReadAt(buf, 20); k != 0 || !errors.Is(err, io.EOF) {
		s.Fatalf("ReadAt at the end = %d, %v; want 0, io.EOF", k, err)
	}
	// Concurrent reads, as a prefetching restorer does.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			b := make([]byte, 3)
			if k, err := f.ReadAt(b, int64(i)); k != 3 || err != nil && !errors.Is(err, io.EOF) || !bytes.Equal(b, data[i:i+3]) {
				errs <- fmt.Errorf("concurrent ReadAt(3, %d) = %d, %v, %q", i, k, err, b)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		s.Error(err)
	}
	s.noErr("Close", f.Close())
}

func testNotFound(s *suite) {
	n, q := name(1), name(2)
	s.create(dlqdump.AreaQuarantine, q, payload(2))
	areas := []dlqdump.Area{dlqdump.AreaReady, dlqdump.AreaQuarantine, dlqdump.AreaArchive}
	for _, a := range areas {
		_, err := s.s.Reader.Open(s.ctx, a, n)
		s.wantErr(fmt.Sprintf("Open(%s) of a missing segment", a), err, dlqdump.ErrNotFound)
		s.wantErr(fmt.Sprintf("Delete(%s) of a missing segment", a), s.s.Reader.Delete(s.ctx, a, n), dlqdump.ErrNotFound)
		for _, to := range areas {
			if to != a {
				s.wantErr(fmt.Sprintf("Move(%s to %s) of a missing segment", a, to), s.s.Reader.Move(s.ctx, n, a, to, "why"), dlqdump.ErrNotFound)
			}
		}
	}
	_, err := s.s.Reader.Claim(s.ctx, n, "owner", longLease)
	s.wantErr("Claim of a missing segment", err, dlqdump.ErrNotFound)
	_, err = s.s.Reader.Claim(s.ctx, q, "owner", longLease)
	s.wantErr("Claim of a quarantined segment", err, dlqdump.ErrNotFound)
	_, err = s.s.Reader.Open(s.ctx, dlqdump.AreaReady, q)
	s.wantErr("Open(ready) of a quarantined segment", err, dlqdump.ErrNotFound)
	// None of this created anything.
	s.wantOnly(dlqdump.AreaReady)
	s.wantOnly(dlqdump.AreaQuarantine, q)
	s.wantOnly(dlqdump.AreaArchive)
}

func testClaimExclusive(s *suite) {
	n, other := name(1), name(2)
	s.write(n, payload(1))
	s.write(other, payload(2))
	a := s.claim(n, "restorer-a", longLease)
	if a.Checkpoint() != (dlqdump.Checkpoint{}) {
		s.Fatalf("first claim's Checkpoint() = %+v, want zero", a.Checkpoint())
	}
	_, err := s.s.Reader.Claim(s.ctx, n, "restorer-b", longLease)
	s.wantErr("Claim of a segment claimed by another owner", err, dlqdump.ErrClaimed)
	// Claims are per segment.
	b := s.claim(other, "restorer-b", longLease)

	si, _ := s.find(dlqdump.AreaReady, n)
	if si.Claim == nil || si.Claim.Owner != "restorer-a" || !si.Claim.Expires.After(time.Now()) {
		s.Fatalf("List shows claim %+v, want restorer-a's live claim", si.Claim)
	}
	want := cp(64, 10, 9, 1)
	s.noErr("Renew", a.Renew(s.ctx, want))
	si, _ = s.find(dlqdump.AreaReady, n)
	if si.Claim == nil || si.Claim.Checkpoint != want || si.Claim.Owner != "restorer-a" {
		s.Fatalf("List after Renew shows claim %+v, want restorer-a's with checkpoint %+v", si.Claim, want)
	}
	if a.Checkpoint() != (dlqdump.Checkpoint{}) {
		s.Fatalf("Checkpoint() = %+v after Renew, want the checkpoint found at claim time (zero)", a.Checkpoint())
	}
	_, err = s.s.Reader.Claim(s.ctx, n, "restorer-b", longLease)
	s.wantErr("Claim of a renewed claim", err, dlqdump.ErrClaimed)
	s.noErr("Renew of the untouched claim", a.Renew(s.ctx, want))
	s.noErr("Renew", b.Renew(s.ctx, cp(64, 1, 1, 0)))
	s.wantOnly(dlqdump.AreaReady, n, other)
}

func testClaimConcurrent(s *suite) {
	const racers = 16
	for round := range 3 {
		n := name(round)
		s.write(n, payload(round))
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			mu     sync.Mutex
			won    []string
			claims []dlqdump.Claim
			others []error
		)
		for i := range racers {
			owner := fmt.Sprintf("racer-%d", i)
			wg.Go(func() {
				<-start
				c, err := s.s.Reader.Claim(s.ctx, n, owner, longLease)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, owner)
					claims = append(claims, c)
				case !errors.Is(err, dlqdump.ErrClaimed):
					others = append(others, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(others) > 0 {
			s.Fatalf("round %d: Claim failed with errors other than ErrClaimed: %v", round, others)
		}
		if len(won) != 1 {
			s.Fatalf("round %d: %d of %d concurrent claims won (%q), want exactly 1", round, len(won), racers, won)
		}
		si, _ := s.find(dlqdump.AreaReady, n)
		if si.Claim == nil || si.Claim.Owner != won[0] {
			s.Fatalf("round %d: List shows claim %+v, want the winner %s", round, si.Claim, won[0])
		}
		s.noErr("Renew by the winner", claims[0].Renew(s.ctx, cp(64, 1, 1, 0)))
	}
}

func testLeaseExpiry(s *suite) {
	n := name(1)
	s.write(n, payload(1))
	a := s.claim(n, "crashed", s.lease)
	want := cp(1234, 56, 50, 6)
	s.noErr("Renew", a.Renew(s.ctx, want))
	_, err := s.s.Reader.Claim(s.ctx, n, "taker", longLease)
	s.wantErr("Claim before the lease expired", err, dlqdump.ErrClaimed)

	time.Sleep(s.lease + s.lease/2)
	si, _ := s.find(dlqdump.AreaReady, n)
	if si.Claim == nil || si.Claim.Expires.After(time.Now()) || si.Claim.Checkpoint != want {
		s.Fatalf("List after the lease expired shows claim %+v, want an expired one with checkpoint %+v", si.Claim, want)
	}
	b := s.claim(n, "taker", longLease)
	if b.Checkpoint() != want {
		s.Fatalf("taken-over claim's Checkpoint() = %+v, want %+v", b.Checkpoint(), want)
	}
	// The old holder lost its lease, whatever it tries.
	s.wantErr("Renew after a takeover", a.Renew(s.ctx, cp(9999, 99, 99, 0)), dlqdump.ErrLeaseLost)
	s.wantErr("Release after a takeover", a.Release(s.ctx), dlqdump.ErrLeaseLost)
	s.wantErr("Complete after a takeover", a.Complete(s.ctx, false), dlqdump.ErrLeaseLost)
	s.wantErr("Complete(archive) after a takeover", a.Complete(s.ctx, true), dlqdump.ErrLeaseLost)
	s.wantErr("Quarantine after a takeover", a.Quarantine(s.ctx, "stale"), dlqdump.ErrLeaseLost)
	s.wantErr("Renew after a takeover, again", a.Renew(s.ctx, cp(9999, 99, 99, 0)), dlqdump.ErrLeaseLost)
	s.wantOnly(dlqdump.AreaReady, n)
	s.wantOnly(dlqdump.AreaQuarantine)
	s.wantOnly(dlqdump.AreaArchive)
	si, _ = s.find(dlqdump.AreaReady, n)
	if si.Claim == nil || si.Claim.Owner != "taker" || si.Claim.Checkpoint != want || !si.Claim.Expires.After(time.Now()) {
		s.Fatalf("List shows claim %+v, want taker's live claim with checkpoint %+v untouched by the old holder", si.Claim, want)
	}
	s.noErr("Renew by the new holder", b.Renew(s.ctx, cp(2000, 80, 74, 6)))
	s.noErr("Complete by the new holder", b.Complete(s.ctx, false))
	s.wantOnly(dlqdump.AreaReady)
}

func testSameOwner(s *suite) {
	n := name(1)
	s.write(n, payload(1))
	first := s.claim(n, "same-owner", longLease)
	want := cp(100, 3, 3, 0)
	s.noErr("Renew", first.Renew(s.ctx, want))
	second := s.claim(n, "same-owner", longLease)
	if second.Checkpoint() != want {
		s.Fatalf("second claim's Checkpoint() = %+v, want %+v", second.Checkpoint(), want)
	}
	s.wantErr("Renew of the first of two claims by one owner", first.Renew(s.ctx, cp(200, 5, 5, 0)), dlqdump.ErrLeaseLost)
	s.wantErr("Complete of the first of two claims by one owner", first.Complete(s.ctx, false), dlqdump.ErrLeaseLost)
	s.noErr("Renew of the second claim", second.Renew(s.ctx, cp(300, 7, 7, 0)))
	s.wantOnly(dlqdump.AreaReady, n)
}

func testRelease(s *suite) {
	n := name(1)
	s.write(n, payload(1))
	a := s.claim(n, "restorer-a", longLease)
	want := cp(640, 20, 19, 1)
	s.noErr("Renew", a.Renew(s.ctx, want))
	s.noErr("Release", a.Release(s.ctx))
	si, ok := s.find(dlqdump.AreaReady, n)
	if !ok {
		s.Fatal("a released segment is not ready")
	}
	if si.Claim != nil && si.Claim.Expires.After(time.Now()) {
		s.Fatalf("List after Release shows a live claim %+v", si.Claim)
	}
	if si.Claim != nil && si.Claim.Checkpoint != want {
		s.Fatalf("List after Release shows checkpoint %+v, want %+v", si.Claim.Checkpoint, want)
	}
	s.wantEnded(a, dlqdump.ErrClosed)
	// Anyone may claim at once, and resumes at the checkpoint.
	b := s.claim(n, "restorer-b", longLease)
	if b.Checkpoint() != want {
		s.Fatalf("claim after Release: Checkpoint() = %+v, want %+v", b.Checkpoint(), want)
	}
	s.wantEnded(a, dlqdump.ErrClosed)
	s.noErr("Release", b.Release(s.ctx))
	// Releasing without renewing keeps the checkpoint too, for the same
	// owner as for another.
	c := s.claim(n, "restorer-a", longLease)
	if c.Checkpoint() != want {
		s.Fatalf("third claim: Checkpoint() = %+v, want %+v", c.Checkpoint(), want)
	}
	s.noErr("Release", c.Release(s.ctx))
	s.wantOnly(dlqdump.AreaReady, n)
	s.wantContent(dlqdump.AreaReady, n, payload(1))
}

func testCompleteDelete(s *suite) {
	n, keep := name(1), name(2)
	s.write(n, payload(1))
	s.write(keep, payload(2))
	c := s.claim(n, "restorer", longLease)
	s.noErr("Renew", c.Renew(s.ctx, cp(64, 5, 5, 0)))
	s.noErr("Complete(false)", c.Complete(s.ctx, false))
	s.wantOnly(dlqdump.AreaReady, keep)
	s.wantOnly(dlqdump.AreaArchive)
	s.wantOnly(dlqdump.AreaQuarantine)
	_, err := s.s.Reader.Open(s.ctx, dlqdump.AreaReady, n)
	s.wantErr("Open of a completed segment", err, dlqdump.ErrNotFound)
	_, err = s.s.Reader.Claim(s.ctx, n, "restorer", longLease)
	s.wantErr("Claim of a completed segment", err, dlqdump.ErrNotFound)
	s.wantEnded(c, dlqdump.ErrClosed)
	s.wantContent(dlqdump.AreaReady, keep, payload(2))
}

func testCompleteArchive(s *suite) {
	n := name(1)
	s.write(n, payload(11))
	c := s.claim(n, "restorer", longLease)
	s.noErr("Complete(true)", c.Complete(s.ctx, true))
	s.wantOnly(dlqdump.AreaReady)
	s.wantOnly(dlqdump.AreaArchive, n)
	s.wantOnly(dlqdump.AreaQuarantine)
	si, _ := s.find(dlqdump.AreaArchive, n)
	if si.Size != int64(len(payload(11))) || si.Area != dlqdump.AreaArchive || si.Claim != nil {
		s.Fatalf("archived SegmentInfo = %+v, want size %d, area archive, no claim", si, len(payload(11)))
	}
	s.wantContent(dlqdump.AreaArchive, n, payload(11))
	_, err := s.s.Reader.Claim(s.ctx, n, "restorer", longLease)
	s.wantErr("Claim of an archived segment", err, dlqdump.ErrNotFound)
	s.wantEnded(c, dlqdump.ErrClosed)
}

func testClaimQuarantine(s *suite) {
	n := name(1)
	s.write(n, payload(5))
	c := s.claim(n, "restorer", longLease)
	const reason = "unreadable: block 3 at offset 4096: checksum mismatch"
	s.noErr("Quarantine", c.Quarantine(s.ctx, reason))
	s.wantOnly(dlqdump.AreaReady)
	s.wantOnly(dlqdump.AreaQuarantine, n)
	si, _ := s.find(dlqdump.AreaQuarantine, n)
	if si.Reason != reason || si.Area != dlqdump.AreaQuarantine || si.Size != int64(len(payload(5))) {
		s.Fatalf("quarantined SegmentInfo = %+v, want reason %q and size %d", si, reason, len(payload(5)))
	}
	s.wantContent(dlqdump.AreaQuarantine, n, payload(5))
	_, err := s.s.Reader.Claim(s.ctx, n, "restorer", longLease)
	s.wantErr("Claim of a quarantined segment", err, dlqdump.ErrNotFound)
	s.wantEnded(c, dlqdump.ErrClosed)
}

func testMove(s *suite) {
	n, other := name(1), name(2)
	s.write(n, payload(8))
	s.write(other, payload(9))
	move := func(from, to dlqdump.Area, reason string) {
		s.Helper()
		s.noErr(fmt.Sprintf("Move(%s to %s)", from, to), s.s.Reader.Move(s.ctx, n, from, to, reason))
	}
	reasonOf := func() string {
		s.Helper()
		si, ok := s.find(dlqdump.AreaQuarantine, n)
		if !ok {
			s.Fatal("moved segment is not in quarantine")
		}
		return si.Reason
	}

	move(dlqdump.AreaReady, dlqdump.AreaQuarantine, "operator: bad batch")
	s.wantOnly(dlqdump.AreaReady, other)
	s.wantOnly(dlqdump.AreaQuarantine, n)
	if r := reasonOf(); r != "operator: bad batch" {
		s.Fatalf("Reason = %q, want %q", r, "operator: bad batch")
	}
	s.wantContent(dlqdump.AreaQuarantine, n, payload(8))

	move(dlqdump.AreaQuarantine, dlqdump.AreaReady, "")
	s.wantOnly(dlqdump.AreaReady, n, other)
	s.wantOnly(dlqdump.AreaQuarantine)
	if si, _ := s.find(dlqdump.AreaReady, n); si.Reason != "" || si.Size != int64(len(payload(8))) {
		s.Fatalf("segment moved back to ready: %+v, want no reason and size %d", si, len(payload(8)))
	}
	// Back to quarantine without a reason: the old one is gone.
	move(dlqdump.AreaReady, dlqdump.AreaQuarantine, "")
	if r := reasonOf(); r != "" {
		s.Fatalf("Reason = %q after leaving quarantine and coming back without one, want none", r)
	}
	move(dlqdump.AreaQuarantine, dlqdump.AreaArchive, "")
	s.wantOnly(dlqdump.AreaArchive, n)
	s.wantOnly(dlqdump.AreaQuarantine)
	move(dlqdump.AreaArchive, dlqdump.AreaQuarantine, "second look")
	if r := reasonOf(); r != "second look" {
		s.Fatalf("Reason = %q, want %q", r, "second look")
	}
	move(dlqdump.AreaQuarantine, dlqdump.AreaReady, "")
	s.wantOnly(dlqdump.AreaReady, n, other)
	s.wantOnly(dlqdump.AreaQuarantine)
	s.wantOnly(dlqdump.AreaArchive)
	s.wantContent(dlqdump.AreaReady, n, payload(8))
	// A segment moved back is claimable.
	c := s.claim(n, "restorer", longLease)
	s.noErr("Complete", c.Complete(s.ctx, false))
	s.wantOnly(dlqdump.AreaReady, other)
}

func testMoveClaimed(s *suite) {
	n := name(1)
	s.write(n, payload(4))
	c := s.claim(n, "restorer", longLease)
	want := cp(64, 2, 2, 0)
	s.noErr("Renew", c.Renew(s.ctx, want))
	for _, to := range []dlqdump.Area{dlqdump.AreaQuarantine, dlqdump.AreaArchive} {
		err := s.s.Reader.Move(s.ctx, n, dlqdump.AreaReady, to, "operator")
		s.wantErr(fmt.Sprintf("Move of a claimed segment to %s", to), err, dlqdump.ErrClaimed)
	}
	s.wantOnly(dlqdump.AreaReady, n)
	s.wantOnly(dlqdump.AreaQuarantine)
	s.wantOnly(dlqdump.AreaArchive)
	s.noErr("Renew after a refused Move", c.Renew(s.ctx, want))
	s.noErr("Release", c.Release(s.ctx))
	s.noErr("Move after Release", s.s.Reader.Move(s.ctx, n, dlqdump.AreaReady, dlqdump.AreaQuarantine, "operator"))
	s.wantOnly(dlqdump.AreaReady)
	s.wantOnly(dlqdump.AreaQuarantine, n)
}

func testDelete(s *suite) {
	r, q, a := name(1), name(2), name(3)
	keep := name(4)
	s.write(r, payload(1))
	s.write(keep, payload(4))
	s.write(q, payload(2))
	s.noErr("Move", s.s.Reader.Move(s.ctx, q, dlqdump.AreaReady, dlqdump.AreaQuarantine, "to be deleted"))
	s.create(dlqdump.AreaArchive, a, payload(3))
	for _, x := range []struct {
		area dlqdump.Area
		name string
	}{{dlqdump.AreaReady, r}, {dlqdump.AreaQuarantine, q}, {dlqdump.AreaArchive, a}} {
		s.noErr(fmt.Sprintf("Delete(%s)", x.area), s.s.Reader.Delete(s.ctx, x.area, x.name))
		_, err := s.s.Reader.Open(s.ctx, x.area, x.name)
		s.wantErr(fmt.Sprintf("Open(%s) of a deleted segment", x.area), err, dlqdump.ErrNotFound)
		s.wantErr(fmt.Sprintf("Delete(%s) again", x.area), s.s.Reader.Delete(s.ctx, x.area, x.name), dlqdump.ErrNotFound)
	}
	s.wantOnly(dlqdump.AreaReady, keep)
	s.wantOnly(dlqdump.AreaQuarantine)
	s.wantOnly(dlqdump.AreaArchive)
	_, err := s.s.Reader.Claim(s.ctx, r, "restorer", longLease)
	s.wantErr("Claim of a deleted segment", err, dlqdump.ErrNotFound)
	// The reason went with the quarantined segment.
	s.create(dlqdump.AreaQuarantine, q, payload(2))
	if si, _ := s.find(dlqdump.AreaQuarantine, q); si.Reason != "" {
		s.Fatalf("a new quarantined segment under a deleted one's name has reason %q", si.Reason)
	}
	// A claim released before Delete does not come back with the name.
	s.write(r, payload(1))
	c := s.claim(r, "restorer", longLease)
	s.noErr("Renew", c.Renew(s.ctx, cp(64, 1, 1, 0)))
	s.noErr("Release", c.Release(s.ctx))
	s.noErr("Delete", s.s.Reader.Delete(s.ctx, dlqdump.AreaReady, r))
	s.write(r, payload(1))
	if c := s.claim(r, "restorer", longLease); c.Checkpoint() != (dlqdump.Checkpoint{}) {
		s.Fatalf("claim of a segment written again after Delete resumes at %+v, want zero", c.Checkpoint())
	}
	s.wantContent(dlqdump.AreaReady, keep, payload(4))
}

func testCreateInAreas(s *suite) {
	created := nameBase.Add(2 * time.Hour)
	hdr := segment.Header{Codec: segment.CodecS2, DataVersion: 7, Created: created, ID: segment.NewID(created)}
	q := segment.FileName(created, hdr.ID)
	sw, err := s.s.Reader.Create(s.ctx, dlqdump.AreaQuarantine, q)
	s.noErr("Reader.Create(quarantine)", err)
	w, err := segment.NewWriter(sw, hdr, nil)
	s.noErr("segment.NewWriter", err)
	for i := range 100 {
		s.noErr("Add", w.Add(created.Add(time.Duration(i)), map[string]string{"dlqdump-error": "poison"}, payload(i)))
	}
	s.noErr("segment.Writer.Close", w.Close())
	s.wantOnly(dlqdump.AreaQuarantine)
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantOnly(dlqdump.AreaQuarantine, q)
	s.wantOnly(dlqdump.AreaReady)
	s.wantOnly(dlqdump.AreaArchive)
	si, _ := s.find(dlqdump.AreaQuarantine, q)
	if si.Reason != "" || si.Size != w.Size() {
		s.Fatalf("created quarantined SegmentInfo = %+v, want no reason and size %d", si, w.Size())
	}
	f, err := s.s.Reader.Open(s.ctx, dlqdump.AreaQuarantine, q)
	s.noErr("Open(quarantine)", err)
	sr, err := segment.NewReader(f, f.Size(), nil)
	s.noErr("segment.NewReader", err)
	for i := 0; ; i++ {
		r, err := sr.Next()
		if errors.Is(err, io.EOF) {
			if i != 100 {
				s.Fatalf("read %d records back, want 100", i)
			}
			break
		}
		s.noErr("Next", err)
		if v, _ := r.Headers.Get("dlqdump-error"); v != "poison" || !bytes.Equal(r.Payload, payload(i)) {
			s.Fatalf("record %d read back wrong: headers %v payload %q", i, r.Headers.Map(), r.Payload)
		}
	}
	s.noErr("Close", f.Close())

	// In ready (the rest of a segment), claimable once committed.
	rest := name(5)
	sw, err = s.s.Reader.Create(s.ctx, dlqdump.AreaReady, rest)
	s.noErr("Reader.Create(ready)", err)
	if _, err := sw.Write(payload(5)); err != nil {
		s.Fatal(err)
	}
	s.wantOnly(dlqdump.AreaReady)
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantOnly(dlqdump.AreaReady, rest)
	s.wantContent(dlqdump.AreaReady, rest, payload(5))
	c := s.claim(rest, "restorer", longLease)
	s.noErr("Release", c.Release(s.ctx))

	// Aborted, nothing.
	gone := name(6)
	sw, err = s.s.Reader.Create(s.ctx, dlqdump.AreaQuarantine, gone)
	s.noErr("Reader.Create(quarantine)", err)
	if _, err := sw.Write(payload(6)); err != nil {
		s.Fatal(err)
	}
	s.noErr("Abort", sw.Abort())
	s.wantOnly(dlqdump.AreaQuarantine, q)
	_, err = s.s.Reader.Open(s.ctx, dlqdump.AreaQuarantine, gone)
	s.wantErr("Open of an aborted segment", err, dlqdump.ErrNotFound)
}

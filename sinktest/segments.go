package sinktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Publishing through the Writer, listing and reading.

func testCommitAtomic(s *suite) {
	n := name(1)
	sw, err := s.s.Writer.Create(s.ctx, n)
	s.noErr("Writer.Create", err)
	s.writeAll(sw, n, []byte("first half, "))
	s.wantOnly(sink.AreaReady)
	s.wantMissing(sink.AreaReady, n)
	s.writeAll(sw, n, []byte("second half"))
	s.wantOnly(sink.AreaReady)
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantOnly(sink.AreaReady, n)
	s.wantContent(sink.AreaReady, n, []byte("first half, second half"))
	si := s.info(sink.AreaReady, n)
	if si.Size != int64(len("first half, second half")) || si.Area != sink.AreaReady || si.Reason != "" {
		s.Fatalf("Info = %+v, want size 23 in ready, no reason", si)
	}
	if si.Modified.IsZero() {
		s.Fatal("Info.Modified is zero")
	}
	s.wantOnly(sink.AreaQuarantine)
	s.wantOnly(sink.AreaArchive)
	s.wantRecordNames()
}

func testAbort(s *suite) {
	a, b := name(1), name(2)
	swa, err := s.s.Writer.Create(s.ctx, a)
	s.noErr("Writer.Create", err)
	swb, err := s.s.Writer.Create(s.ctx, b)
	s.noErr("Writer.Create", err)
	s.writeAll(swa, a, payload(7))
	s.writeAll(swb, b, payload(8))
	s.noErr("Abort", swa.Abort())
	s.noErr("Commit", swb.Commit(s.ctx))
	s.wantOnly(sink.AreaReady, b)
	s.wantMissing(sink.AreaReady, a)
	// The name is free again.
	s.write(a, payload(3))
	s.wantOnly(sink.AreaReady, a, b)
	s.wantContent(sink.AreaReady, a, payload(3))
	s.wantContent(sink.AreaReady, b, payload(8))
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
		s.writeAll(sw, n, []byte(step.write))
		if step.truncate >= 0 {
			s.noErr("Truncate", sw.Truncate(step.truncate))
		}
	}
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantContent(sink.AreaReady, n, []byte("hello, there!"))

	// Truncate to zero starts over.
	m := name(2)
	sw, err = s.s.Writer.Create(s.ctx, m)
	s.noErr("Writer.Create", err)
	s.writeAll(sw, m, []byte("garbage"))
	s.noErr("Truncate", sw.Truncate(0))
	s.writeAll(sw, m, []byte("clean"))
	s.noErr("Commit", sw.Commit(s.ctx))
	s.wantContent(sink.AreaReady, m, []byte("clean"))
	if si := s.info(sink.AreaReady, m); si.Size != 5 {
		s.Fatalf("Size = %d after truncating and rewriting, want 5", si.Size)
	}
}

// A Writer's Commit under a name already published keeps the published
// segment as it is, whatever it returns.
func testWriterNeverReplaces(s *suite) {
	n := name(1)
	s.write(n, payload(1))
	for _, newcomer := range [][]byte{payload(2), bytes.ToUpper(payload(1))} { // another size, the same size
		sw, err := s.s.Writer.Create(s.ctx, n)
		if err != nil {
			continue // refusing at once is fine
		}
		s.writeAll(sw, n, newcomer)
		if err := sw.Commit(s.ctx); err != nil {
			_ = sw.Abort()
		}
		s.wantContent(sink.AreaReady, n, payload(1))
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
	s.wantOnly(sink.AreaReady, want...)
	for i, si := range s.list(sink.AreaReady) {
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
		s.create(sink.AreaQuarantine, m, payload(1))
	}
	got := s.list(sink.AreaReady)
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
		if si.Area != sink.AreaReady {
			s.Fatalf("%s: Area %v in List(ready)", si.Name, si.Area)
		}
	}
	s.wantOnly(sink.AreaQuarantine, q...)
	// Stopping early is allowed.
	seen := 0
	for _, err := range s.s.Reader.List(s.ctx, sink.AreaReady) {
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

	if si := s.info(sink.AreaReady, n); si.Size != w.Size() {
		s.Fatalf("List: %+v, want size %d", si, w.Size())
	}
	f, err := s.s.Reader.Open(s.ctx, sink.AreaReady, n)
	s.noErr("Open", err)
	defer f.Close()
	if f.Size() != w.Size() {
		s.Fatalf("File.Size() = %d, want %d", f.Size(), w.Size())
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
		if got.Seq != uint64(i) || got.Time != want.t.UnixNano() || !bytes.Equal(got.Payload, want.payload) || !maps.Equal(got.Headers.Map(), want.headers) {
			s.Fatalf("record %d = seq %d time %d headers %v payload %d bytes; want time %d headers %v payload %d bytes",
				i, got.Seq, got.Time, got.Headers.Map(), len(got.Payload), want.t.UnixNano(), want.headers, len(want.payload))
		}
	}
}

func testReadAt(s *suite) {
	n := name(1)
	data := []byte("0123456789abcdefghij")
	s.write(n, data)
	f, err := s.s.Reader.Open(s.ctx, sink.AreaReady, n)
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
	s.create(sink.AreaQuarantine, q, payload(2))
	for _, a := range areas {
		s.wantMissing(a, n)
		s.wantErr(fmt.Sprintf("Delete(%s) of a missing segment", a), s.s.Reader.Delete(s.ctx, a, n), sink.ErrNotFound)
		for _, to := range areas {
			if to != a {
				s.wantErr(fmt.Sprintf("Move(%s to %s) of a missing segment", a, to), s.s.Reader.Move(s.ctx, n, a, to, "why"), sink.ErrNotFound)
			}
		}
	}
	// A segment is only in its area.
	s.wantMissing(sink.AreaReady, q)
	s.wantMissing(sink.AreaArchive, q)
	s.wantErr("Delete(ready) of a quarantined segment", s.s.Reader.Delete(s.ctx, sink.AreaReady, q), sink.ErrNotFound)
	s.wantErr("Move(ready to archive) of a quarantined segment", s.s.Reader.Move(s.ctx, q, sink.AreaReady, sink.AreaArchive, ""), sink.ErrNotFound)
	// None of this created or removed anything.
	s.wantOnly(sink.AreaReady)
	s.wantOnly(sink.AreaQuarantine, q)
	s.wantOnly(sink.AreaArchive)
	s.wantContent(sink.AreaQuarantine, q, payload(2))
	s.wantRecordNames()
}

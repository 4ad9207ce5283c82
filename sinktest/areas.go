package sinktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// The Reader's segment primitives: Create, Move, Delete.

// other returns the area that is neither a nor b.
func other(a, b sink.Area) sink.Area {
	for _, c := range areas {
		if c != a && c != b {
			return c
		}
	}
	panic("sinktest: no third area")
}

// place stores data as segment name in an area. A quarantined segment with a
// reason is made in staging and moved to quarantine with it.
func (s *suite) place(area sink.Area, name string, data []byte, reason string, staging sink.Area) {
	s.Helper()
	if area != sink.AreaQuarantine || reason == "" {
		s.create(area, name, data)
		return
	}
	s.create(staging, name, data)
	s.move(name, staging, area, reason)
}

func testCreateInAreas(s *suite) {
	for i, area := range areas {
		created := nameBase.Add(time.Duration(2+i) * time.Hour)
		hdr := segment.Header{Codec: segment.CodecS2, DataVersion: 7, Created: created, ID: segment.NewID(created)}
		n := segment.FileName(created, hdr.ID)
		sw, err := s.s.Reader.Create(s.ctx, area, n)
		s.noErr(fmt.Sprintf("Reader.Create(%s)", area), err)
		w, err := segment.NewWriter(sw, hdr, nil)
		s.noErr("segment.NewWriter", err)
		for j := range 100 {
			s.noErr("Add", w.Add(created.Add(time.Duration(j)), map[string]string{"dlqdump-error": "poison"}, payload(j)))
		}
		s.noErr("segment.Writer.Close", w.Close())
		s.wantOnly(area)
		s.wantMissing(area, n)
		s.noErr("Commit", sw.Commit(s.ctx))
		s.wantOnly(area, n)
		for _, a := range areas {
			if a != area {
				s.wantOnly(a)
			}
		}
		si := s.info(area, n)
		if si.Reason != "" || si.Size != w.Size() || si.Area != area || si.Modified.IsZero() {
			s.Fatalf("created segment's Info = %+v, want area %s, no reason, size %d, a modification time", si, area, w.Size())
		}
		f, err := s.s.Reader.Open(s.ctx, area, n)
		s.noErr(fmt.Sprintf("Open(%s)", area), err)
		sr, err := segment.NewReader(f, f.Size(), nil)
		s.noErr("segment.NewReader", err)
		for j := 0; ; j++ {
			r, err := sr.Next()
			if errors.Is(err, io.EOF) {
				if j != 100 {
					s.Fatalf("read %d records back, want 100", j)
				}
				break
			}
			s.noErr("Next", err)
			if v, _ := r.Headers.Get("dlqdump-error"); v != "poison" || !bytes.Equal(r.Payload, payload(j)) {
				s.Fatalf("record %d read back wrong: headers %v payload %q", j, r.Headers.Map(), r.Payload)
			}
		}
		s.noErr("Close", f.Close())

		// Aborted, nothing; the name is free again.
		gone := name(10 + i)
		sw, err = s.s.Reader.Create(s.ctx, area, gone)
		s.noErr(fmt.Sprintf("Reader.Create(%s)", area), err)
		s.writeAll(sw, gone, payload(6))
		s.noErr("Abort", sw.Abort())
		s.wantOnly(area, n)
		s.wantMissing(area, gone)
		s.create(area, gone, payload(7))
		s.wantContent(area, gone, payload(7))
		s.noErr("Delete", s.s.Reader.Delete(s.ctx, area, gone))
		s.noErr("Delete", s.s.Reader.Delete(s.ctx, area, n))
	}
	s.wantRecordNames()
}

// Commit refuses a name already in the area, leaving that segment as it was;
// the same name in another area is another segment.
func testCreateRefusesExisting(s *suite) {
	n := name(1)
	existing := payload(1)
	for _, area := range []sink.Area{sink.AreaQuarantine, sink.AreaReady, sink.AreaArchive} {
		s.place(area, n, existing, "original reason", sink.AreaReady)
		check := func(what string) {
			s.Helper()
			if got := s.names(area); len(got) != 1 || got[0] != n {
				s.Fatalf("%s: List(%s) = %q, want only %s", what, area, got, n)
			}
			s.wantContent(area, n, existing)
			if area == sink.AreaQuarantine {
				s.wantReason(n, "original reason")
			}
		}
		// Another size, then the same size with other bytes.
		for _, newcomer := range [][]byte{payload(2), bytes.ToUpper(existing)} {
			sw, err := s.s.Reader.Create(s.ctx, area, n)
			s.noErr(fmt.Sprintf("Reader.Create(%s) of an existing name", area), err)
			s.writeAll(sw, n, newcomer)
			s.wantErr(fmt.Sprintf("Commit(%s) over an existing segment", area), sw.Commit(s.ctx), sink.ErrExist)
			check("after a refused Commit")
			_ = sw.Abort() // may fail after a failed Commit; must not touch the existing segment
			check("after Abort of a refused Commit")
		}
		// The same bytes: refused, or taken for a retry of its own Commit.
		sw, err := s.s.Reader.Create(s.ctx, area, n)
		s.noErr(fmt.Sprintf("Reader.Create(%s) of an existing name", area), err)
		s.writeAll(sw, n, existing)
		if err := sw.Commit(s.ctx); err != nil && !errors.Is(err, sink.ErrExist) {
			s.Fatalf("Commit(%s) of the bytes already stored = %v, want success or an error wrapping %v", area, err, sink.ErrExist)
		} else if err != nil {
			_ = sw.Abort()
		}
		check("after a Commit of the same bytes")
	}
	// One name in every area: three segments.
	for _, area := range areas {
		s.wantOnly(area, n)
	}
}

// Move between every pair of areas: a quarantined segment carries the reason
// it was moved there with, and loses it when it leaves.
func testMove(s *suite) {
	n, keep := name(1), name(2)
	s.write(n, payload(8))
	s.write(keep, payload(9))
	check := func(area sink.Area) {
		s.Helper()
		si := s.info(area, n)
		if si.Area != area || si.Size != int64(len(payload(8))) || si.Modified.IsZero() {
			s.Fatalf("moved segment's Info = %+v, want area %s, size %d, a modification time", si, area, len(payload(8)))
		}
		if area != sink.AreaQuarantine && si.Reason != "" {
			s.Fatalf("segment moved to %s has reason %q, want none", area, si.Reason)
		}
		s.wantContent(area, n, payload(8))
		for _, a := range areas {
			if a != area {
				s.wantMissing(a, n)
			}
		}
		s.wantContent(sink.AreaReady, keep, payload(9))
	}

	s.move(n, sink.AreaReady, sink.AreaQuarantine, "operator: bad batch")
	check(sink.AreaQuarantine)
	s.wantOnly(sink.AreaReady, keep)
	s.wantOnly(sink.AreaQuarantine, n)
	s.wantReason(n, "operator: bad batch")

	s.move(n, sink.AreaQuarantine, sink.AreaReady, "")
	check(sink.AreaReady)
	s.wantOnly(sink.AreaReady, n, keep)
	s.wantOnly(sink.AreaQuarantine)
	// Back to quarantine without a reason: the old one is gone.
	s.move(n, sink.AreaReady, sink.AreaQuarantine, "")
	s.wantReason(n, "")
	s.move(n, sink.AreaQuarantine, sink.AreaArchive, "")
	check(sink.AreaArchive)
	s.wantOnly(sink.AreaArchive, n)
	s.move(n, sink.AreaArchive, sink.AreaQuarantine, "second look: résumé\tfailed")
	check(sink.AreaQuarantine)
	s.wantReason(n, "second look: résumé\tfailed")
	s.move(n, sink.AreaQuarantine, sink.AreaReady, "")
	check(sink.AreaReady)
	s.move(n, sink.AreaReady, sink.AreaArchive, "")
	check(sink.AreaArchive)
	s.move(n, sink.AreaArchive, sink.AreaReady, "")
	check(sink.AreaReady)
	s.wantOnly(sink.AreaReady, n, keep)
	s.wantOnly(sink.AreaQuarantine)
	s.wantOnly(sink.AreaArchive)
}

// Move never replaces a segment: another segment of the name in the
// destination (even of the same size) makes it fail with sink.ErrExist, and
// both segments stay as they were, reasons included.
func testMoveRefuses(s *suite) {
	i := 0
	for _, from := range areas {
		for _, to := range areas {
			if from == to {
				continue
			}
			i++
			n, staging := name(i), other(from, to)
			there := payload(10 + i)
			moving := payload(40 + i)
			if i%2 == 0 {
				moving = bytes.ToUpper(there) // the same size
			}
			s.place(to, n, there, "original reason", staging)
			s.place(from, n, moving, "source reason", staging)
			err := s.s.Reader.Move(s.ctx, n, from, to, "new reason")
			s.wantErr(fmt.Sprintf("Move(%s to %s) onto another segment", from, to), err, sink.ErrExist)
			s.wantContent(to, n, there)
			s.wantContent(from, n, moving)
			if to == sink.AreaQuarantine {
				s.wantReason(n, "original reason")
			}
			if from == sink.AreaQuarantine {
				s.wantReason(n, "source reason")
			}
			s.wantMissing(staging, n)
			s.noErr("Delete", s.s.Reader.Delete(s.ctx, from, n))
			s.noErr("Delete", s.s.Reader.Delete(s.ctx, to, n))
		}
	}
	for _, a := range areas {
		s.wantOnly(a)
	}
}

// Move is safe to retry: after a Move that took effect but left its source
// (a copy and then a delete that did not happen, or an answer lost), the
// destination holds the same bytes and Move removes the source and
// succeeds; after a Move that took effect entirely, the source is missing.
func testMoveAfterMove(s *suite) {
	for i, m := range []struct {
		from, to   sink.Area
		fromReason string
		reason     string
	}{
		{sink.AreaReady, sink.AreaQuarantine, "", "poison"},
		{sink.AreaQuarantine, sink.AreaReady, "before", ""},
		{sink.AreaReady, sink.AreaArchive, "", ""},
		{sink.AreaArchive, sink.AreaQuarantine, "", "second look"},
	} {
		what := fmt.Sprintf("Move(%s to %s)", m.from, m.to)
		staging := other(m.from, m.to)
		n, data := name(2*i), payload(20+i)
		s.place(m.from, n, data, m.fromReason, staging)
		s.move(n, m.from, m.to, m.reason)
		// The source is back, as if its removal had not happened.
		s.place(m.from, n, data, m.fromReason, staging)
		s.noErr(what+" again with the same segment at the destination", s.s.Reader.Move(s.ctx, n, m.from, m.to, m.reason))
		s.wantMissing(m.from, n)
		s.wantContent(m.to, n, data)
		if m.to == sink.AreaQuarantine {
			s.wantReason(n, m.reason)
		}
		// Once it took effect entirely.
		s.wantErr(what+" of a moved segment", s.s.Reader.Move(s.ctx, n, m.from, m.to, m.reason), sink.ErrNotFound)
		s.wantContent(m.to, n, data)

		// The same bytes, stored there otherwise.
		o := name(2*i + 1)
		s.create(m.to, o, data)
		s.place(m.from, o, data, m.fromReason, staging)
		s.noErr(what+" onto a segment with the same bytes", s.s.Reader.Move(s.ctx, o, m.from, m.to, m.reason))
		s.wantMissing(m.from, o)
		s.wantContent(m.to, o, data)
		s.wantMissing(staging, n)
		s.wantMissing(staging, o)
		s.noErr("Delete", s.s.Reader.Delete(s.ctx, m.to, n))
		s.noErr("Delete", s.s.Reader.Delete(s.ctx, m.to, o))
	}
	for _, a := range areas {
		s.wantOnly(a)
	}
}

func testDelete(s *suite) {
	r, q, a := name(1), name(2), name(3)
	keep := name(4)
	s.write(r, payload(1))
	s.write(keep, payload(4))
	s.write(q, payload(2))
	s.move(q, sink.AreaReady, sink.AreaQuarantine, "to be deleted")
	s.create(sink.AreaArchive, a, payload(3))
	for _, x := range []struct {
		area sink.Area
		name string
	}{{sink.AreaReady, r}, {sink.AreaQuarantine, q}, {sink.AreaArchive, a}} {
		s.noErr(fmt.Sprintf("Delete(%s)", x.area), s.s.Reader.Delete(s.ctx, x.area, x.name))
		s.wantMissing(x.area, x.name)
		s.wantErr(fmt.Sprintf("Delete(%s) again", x.area), s.s.Reader.Delete(s.ctx, x.area, x.name), sink.ErrNotFound)
	}
	s.wantOnly(sink.AreaReady, keep)
	s.wantOnly(sink.AreaQuarantine)
	s.wantOnly(sink.AreaArchive)
	s.wantContent(sink.AreaReady, keep, payload(4))
	// The reason went with the quarantined segment.
	s.create(sink.AreaQuarantine, q, payload(2))
	s.wantReason(q, "")
	// A deleted name is free again.
	s.write(r, payload(5))
	s.wantContent(sink.AreaReady, r, payload(5))
}

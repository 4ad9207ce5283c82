package sinktest

import (
	"fmt"

	"github.com/dlqdump/dlqdump/sink"
)

// The staging area and Unstage: what the claim protocol's fenced publish is
// built on.

// stagedName returns the name a claim stages segment n under: a prefix of
// its own, then n.
func stagedName(prefix, n string) string { return prefix + "-" + n }

// A staged segment is in no area a restorer lists, and Unstage moves it into
// each area under its own name, with the reason for quarantine.
func testUnstage(s *suite) {
	for i, to := range areas {
		n := name(i)
		staged := stagedName(fmt.Sprintf("%016x", i+1), n)
		s.create(sink.AreaStaging, staged, payload(30+i))
		s.wantOnly(sink.AreaStaging, staged)
		for _, a := range areas {
			s.wantOnly(a)
		}
		s.wantContent(sink.AreaStaging, staged, payload(30+i))
		reason := ""
		if to == sink.AreaQuarantine {
			reason = "set aside: refused 3 times"
		}
		s.noErr(fmt.Sprintf("Unstage(%s into %s)", staged, to), s.s.Reader.Unstage(s.ctx, staged, n, to, reason))
		s.wantOnly(sink.AreaStaging)
		s.wantOnly(to, n)
		s.wantContent(to, n, payload(30+i))
		if to == sink.AreaQuarantine {
			s.wantReason(n, reason)
		}
		s.wantErr(fmt.Sprintf("Unstage(%s into %s) again", staged, to), s.s.Reader.Unstage(s.ctx, staged, n, to, reason), sink.ErrNotFound)
		s.noErr("Delete", s.s.Reader.Delete(s.ctx, to, n))
	}
	for _, a := range append(areas, sink.AreaStaging) {
		s.wantOnly(a)
	}
}

// Unstage never replaces a segment: another segment of the name in the area
// makes it fail with sink.ErrExist, both left as they were; the same bytes
// there (an earlier Unstage that left its source) remove the staged one.
func testUnstageRefuses(s *suite) {
	for i, to := range areas {
		n := name(i)
		staged := stagedName("00000000000000aa", n)
		s.place(to, n, payload(50+i), "original reason", other(to, sink.AreaReady))
		s.create(sink.AreaStaging, staged, payload(60+i))
		err := s.s.Reader.Unstage(s.ctx, staged, n, to, "new reason")
		s.wantErr(fmt.Sprintf("Unstage(into %s) onto another segment", to), err, sink.ErrExist)
		s.wantContent(to, n, payload(50+i))
		s.wantContent(sink.AreaStaging, staged, payload(60+i))
		if to == sink.AreaQuarantine {
			s.wantReason(n, "original reason")
		}
		s.noErr("Delete", s.s.Reader.Delete(s.ctx, sink.AreaStaging, staged))

		// The same bytes there: the staged copy is removed.
		s.create(sink.AreaStaging, staged, payload(50+i))
		s.noErr(fmt.Sprintf("Unstage(into %s) onto the same bytes", to), s.s.Reader.Unstage(s.ctx, staged, n, to, ""))
		s.wantMissing(sink.AreaStaging, staged)
		s.wantContent(to, n, payload(50+i))
		s.noErr("Delete", s.s.Reader.Delete(s.ctx, to, n))
	}
	for _, a := range append(areas, sink.AreaStaging) {
		s.wantOnly(a)
	}
}

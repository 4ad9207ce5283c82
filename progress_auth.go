package dlqdump

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/dlqdump/dlqdump/internal/claims"
)

// The progress of an encrypted segment is signed with its data key (see
// claims.MarshalSigned): someone who can write to the store but has no key
// cannot make a Restorer skip records of it, finish it, or resume it
// anywhere. A progress that does not authenticate is not acted on.

// marshal encodes the progress, signed when the segment is encrypted.
func (g *segRun) marshal() json.RawMessage {
	p := g.saved()
	if g.key != nil {
		return p.MarshalSigned(g.key, g.hdr.ID)
	}
	return p.Marshal()
}

// authenticate checks the progress found in an encrypted segment's record
// against its data key. One that does not authenticate (written without
// the key: by someone who can write to the store, or by a dlqdump from
// before progress was signed) is not acted on: the segment is moved to
// quarantine with the reason, and its record's progress cleared, so that
// releasing it restores every one of its records, those delivered already
// included. It is logged, counted as Fail("unauthenticated_progress") and
// as a quarantined segment. It reports whether it quarantined the segment.
func (g *segRun) authenticate() (quarantined bool, _ error) {
	if g.prog.Empty() {
		return false, nil // the start: nothing to trust
	}
	err := claims.VerifyProgress(g.found, g.key, g.hdr.ID)
	if err == nil {
		return false, nil
	}
	p := g.prog
	reason := fmt.Sprintf("its restore progress (offset %d, record %d; %d delivered, %d set aside, %d left by filters; done %v; copy %q) "+
		"does not authenticate under the segment's key: it was written by a process without the key, or changed in the store. It was not acted on, "+
		"and it was cleared: releasing the segment restores all of its records, any delivered already included",
		p.Offset, p.Seq, p.Delivered, p.Quarantined, p.Skipped, p.Done, p.Successor)
	if !g.dry {
		g.r.mw.Fail("unauthenticated_progress")
		g.r.log.Warn("a segment's restore progress does not authenticate under its key; quarantining the segment",
			slog.String("segment", g.name), slog.Any("error", err))
		g.prog = claims.Progress{}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stopDeadline)
		defer cancel()
		if err := g.keep.Save(ctx, g.marshal()); err != nil {
			return true, fmt.Errorf("dlqdump: clear the unauthenticated progress of segment %s: %w", g.name, err)
		}
	}
	g.prog = claims.Progress{}
	return true, g.quarantineWhole("progress", reason, 0)
}

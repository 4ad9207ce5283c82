package dlqdump

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// The round trips a segment's restore saves on a distant store (S3): its
// claim is one request when the listing found no record, the segment is
// opened (a small one read whole) while that claim is on its way, and the
// checkpoint of its last block says that it is done and, when nothing but
// finishing it remains, fences the claim for Finish, all in one write.

// claim takes the claim on a ready segment: with a new record, in one
// request, when the last listing found none, else reading its record first.
// With a new record the segment is opened at the same time (see opening),
// unopened is nil otherwise.
func (r *Restorer) claim(ctx context.Context, name string) (cl *claims.Claim, unopened *opening, err error) {
	if st := r.status.Load(); st != nil && !st.recorded[name] {
		o := r.openEarly(ctx, name)
		cl, err := r.claimer.ClaimNew(ctx, name)
		if err != nil {
			o.discard()
			return nil, nil, err
		}
		return cl, o, nil
	}
	cl, err = r.claimer.Claim(ctx, name)
	return cl, nil, err
}

// opening is a ready segment opened while its claim is on its way: the
// request that opens it (on S3 a GET of its first ReadChunk, the whole of a
// small segment) takes the claim's round trip instead of one after it. A
// segment's bytes never change under its name (it is written once, with
// If-None-Match), so what is read before the claim is what the claim
// covers; nothing is delivered or changed before the claim is taken, and
// a claim not taken closes the file unread. Its reads stop when the
// claim's keeper ends (follow).
type opening struct {
	done   chan struct{}
	cancel context.CancelFunc
	f      sink.File
	err    error
	stop   func() bool // the follow of the keeper's context, nil before
}

// openEarly starts opening a ready segment.
func (r *Restorer) openEarly(ctx context.Context, name string) *opening {
	ctx, cancel := context.WithCancel(ctx)
	o := &opening{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(o.done)
		o.f, o.err = r.c.Reader.Open(ctx, sink.AreaReady, name)
	}()
	return o
}

// follow ends the file's reads when ctx (the claim keeper's) ends, as a
// segment opened after its claim is.
func (o *opening) follow(ctx context.Context) {
	if o != nil {
		o.stop = context.AfterFunc(ctx, o.cancel)
	}
}

// take returns the file, or why it could not be opened; the caller closes
// it. Once taken, discard leaves it to the caller.
func (o *opening) take() (sink.File, error) {
	<-o.done
	f, err := o.f, o.err
	o.f = nil
	return f, err
}

// discard closes the file unless it was taken, and stops following the
// keeper. It does nothing on a nil *opening.
func (o *opening) discard() {
	if o == nil {
		return
	}
	<-o.done
	if o.stop != nil {
		o.stop()
	}
	if o.f != nil {
		_ = o.f.Close()
		o.f = nil
	}
	o.cancel()
}

// lastBlock reports whether next, the position after a block, is the end of
// a sealed segment's blocks: that block's checkpoint says the segment is
// done.
func (g *segRun) lastBlock(next segment.Position) bool {
	ft := g.sr.Footer()
	return ft != nil && next.Offset == g.blocksEnd(ft) && next.Seq == ft.Records
}

// saveLast writes the checkpoint of a segment's last block, which says it is
// done, now. When nothing remains but finishing it (no side segment to
// write), the same write fences the claim for Finish (Keeper.SaveFinal).
func (g *segRun) saveLast() error {
	if g.dry {
		return nil
	}
	if err := g.checkpointing(); err != nil {
		return err
	}
	p := g.marshal()
	var err error
	if len(g.prog.Aside) == 0 && !g.untouched() {
		err = g.keep.SaveFinal(g.ctx, p, g.destination())
	} else {
		err = g.keep.Save(g.ctx, p)
	}
	if err != nil {
		return fmt.Errorf("dlqdump: checkpoint segment %s: %w", g.name, err)
	}
	g.lastSave = time.Now()
	return nil
}

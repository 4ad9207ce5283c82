package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

func newCopyCmd(a *app, move bool) *cobra.Command {
	var area string
	verb, short := "cp", "Copy segments between locations (directory <-> S3, directory <-> directory)"
	long := `Copy the segments of SRC (all, or the named ones) to DST, each into the same
area (ready, quarantine with its reason, archive) under the same name. Every
segment's bytes are copied as they are, published atomically in DST (never
in part: an interrupted copy leaves nothing there, or a temporary file that
the next copy or restore removes) and read back: the copy must have the same
size and SHA-256 as the original. A segment already in DST with the same
bytes is left as it is; one with other bytes is an error. So an interrupted
cp can be run again: it completes the copy.

cp does not change SRC, and copies bytes only: a segment that a restorer
already restored in part is copied whole, with the records delivered (cp
says so), and a restore of the copy would deliver those again. Use mv to
move a segment with its restore progress.`
	if move {
		verb, short = "mv", "Move segments between locations: copy, verify, then delete the source"
		long = `Move the segments of SRC (all, or the named ones) to DST, each into the same
area (ready, quarantine with its reason, archive) under the same name.

Each ready segment is first claimed, like a restorer does, so no restorer
takes it while it moves. A segment claimed by a restorer is waited for: if
the claim is renewed, the restorer is alive and the segment is left in
place (the exit status is then 1); if it is not renewed within its lease
(the claim of a restorer or an mv that was killed), it is taken over.

Its bytes are copied into DST (never published in part) and read back
(same size and SHA-256); the copy is published there only once the
segment's claim record in SRC says so, and then the source is deleted. A mv
that stops past its lease meanwhile (a restorer in SRC took the segment
over and restores it there) never publishes its copy. Once a copy is
decided, no restorer in SRC restores the segment: an interrupted mv is
completed by running it again. A segment that a restorer had partly
restored is moved whole with its restore progress: its claim record is
written in DST, released, before the copy is published there, so a restore
in DST resumes after the records delivered already and never delivers them
again. A quarantined segment keeps its reason and its record (what was
delivered before it was quarantined).

A segment already in DST with the same bytes only has its source deleted;
one with other bytes is an error. So an interrupted mv can be run again: it
completes the move.`
	}
	cmd := &cobra.Command{
		Use:   verb + " SRC DST [SEGMENT...]",
		Short: short,
		Long:  long + "\n\nSRC and DST are each a directory or s3://BUCKET/PREFIX.",
		Example: fmt.Sprintf(`  dlqdump %[1]s /var/lib/app/dlq s3://dead-letters/orders/
  dlqdump %[1]s s3://dead-letters/orders/ ./local-copy --area quarantine
  dlqdump %[1]s /var/lib/app/dlq /mnt/other 20261122T101500.123456789Z-0123456789abcdef.dlq`, verb),
		Args: argsRange(2, -1, "SRC DST [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			areas, err := areasFlag(cmd.Flags(), area, args[2:], "all")
			if err != nil {
				return err
			}
			if a.lease < claims.MinLease {
				return usageErrorf("--lease %s: want at least %s", a.lease, claims.MinLease)
			}
			src, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			dst, err := a.open(args[1], false)
			if err != nil {
				return err
			}
			if overlap(src, dst) {
				return usageErrorf("%s and %s are the same location, or one is inside the other", args[0], args[1])
			}
			infos, err := a.list(src, areas, args[2:])
			if err != nil {
				return err
			}
			return a.copyAll(src, dst, infos, move)
		}),
	}
	cmd.Flags().StringVar(&area, "area", "all", "ready, quarantine, archive or all")
	cmd.Flags().DurationVar(&a.lease, "lease", defaultLease, "claim lease on each ready segment moved, renewed every third of it")
	_ = cmd.Flags().MarkHidden("lease")
	return cmd
}

// overlap reports whether two locations are the same, or one lies in an
// area of the other (such as DIR and DIR/quarantine), which cp and mv
// refuse.
func overlap(x, y *location) bool {
	subs := []string{"quarantine/", "archive/", ".claims/"}
	nested := func(inner, outer string) bool {
		for _, s := range subs {
			if strings.HasPrefix(inner, outer+s) {
				return true
			}
		}
		return false
	}
	if x.isS3() || y.isS3() {
		return x.isS3() && y.isS3() && x.bucket == y.bucket &&
			(x.prefix == y.prefix || nested(x.prefix, y.prefix) || nested(y.prefix, x.prefix))
	}
	if sameDir(x.dir, y.dir) {
		return true
	}
	ax, err1 := filepath.Abs(x.dir)
	ay, err2 := filepath.Abs(y.dir)
	if err1 != nil || err2 != nil {
		return false
	}
	ax, ay = filepath.ToSlash(ax)+"/", filepath.ToSlash(ay)+"/"
	return nested(ax, ay) || nested(ay, ax)
}

// copier copies (or moves) segments from src to dst.
type copier struct {
	a        *app
	src, dst *location
	move     bool
	bar      *progress
	// existing holds what dst had, by area, when the command started.
	existing map[sink.Area]map[string]sink.Info
	// records holds the records of the src segments that have one.
	records map[string]*claimView
}

// copyResult says what copyOne did.
type copyResult struct {
	size  int64 // bytes written to DST
	same  bool  // an identical copy was already there
	notes []string
}

// errClaimedSeg means a restorer holds the claim on a ready segment mv was
// to move; copyAll waits to see whether it is alive.
var errClaimedSeg = errors.New("claimed")

func (a *app) copyAll(src, dst *location, infos []sink.Info, move bool) error {
	c := &copier{a: a, src: src, dst: dst, move: move, existing: map[sink.Area]map[string]sink.Info{}}
	var total int64
	for _, si := range infos {
		total += si.Size
	}
	for _, ar := range allAreas {
		c.existing[ar] = map[string]sink.Info{}
		for si, err := range dst.reader.List(a.ctx, ar) {
			if err != nil {
				return fmt.Errorf("list %s segments of %s: %w", ar, dst, err)
			}
			c.existing[ar][si.Name] = si
		}
	}
	var err error
	if c.records, err = a.inspectAll(src, infos); err != nil {
		// Only cp's notes need them; mv reads each record itself.
		a.warnf("%v", err)
	}
	verb := "copying"
	if move {
		verb = "moving"
	}
	c.bar = a.newProgress(verb, total, true)
	st := &copyStats{}
	var later []sink.Info // claimed by others: waited for
	var bytesDone int64
	for i, si := range infos {
		if a.interrupted() {
			break
		}
		c.bar.setNote(fmt.Sprintf("%d/%d segments", i+1, len(infos)))
		err := c.one(si, st)
		bytesDone += si.Size
		c.bar.set(bytesDone)
		if errors.Is(err, errClaimedSeg) {
			later = append(later, si)
			continue
		}
		if err != nil && a.interrupted() {
			c.bar.finish()
			return err
		}
	}
	if len(later) > 0 && !a.interrupted() {
		if err := c.claimedLater(later, st); err != nil {
			c.bar.finish()
			return err
		}
	}
	c.bar.finish()
	done := map[bool]string{false: "copied", true: "moved"}[move]
	a.infof("%s %s from %s to %s%s", done, plural(st.count+st.same, "segment"), src, dst, sameNote(st.same))
	c.logChanges(st)
	if st.failed > 0 {
		return fmt.Errorf("%s of %d not %s", plural(st.failed, "segment"), len(infos), done)
	}
	return nil
}

// copyStats counts the outcomes of copyOne.
type copyStats struct {
	count, same, failed int
	names               []string // copied or moved
}

// logChanges writes what a cp or mv did to the change logs: cp to the
// destination's, mv to both.
func (c *copier) logChanges(st *copyStats) {
	if len(st.names) == 0 {
		return
	}
	action, verb := changelog.ActionCopy, "copied"
	if c.move {
		action, verb = changelog.ActionMove, "moved"
	}
	result := fmt.Sprintf("%s %s from %s to %s", verb, plural(len(st.names), "segment"), c.src, c.dst)
	c.a.logChange(c.dst, action, scopeOf("segments", st.names), result, nil)
	if c.move {
		c.a.logChange(c.src, action, scopeOf("segments", st.names), result, nil)
	}
}

// one copies one segment and reports the outcome; errClaimedSeg is
// returned as it is, to be retried.
func (c *copier) one(si sink.Info, st *copyStats) error {
	a := c.a
	res, err := c.copyOne(si)
	if errors.Is(err, errClaimedSeg) {
		return err
	}
	if err != nil {
		st.failed++
		if !a.interrupted() {
			a.warnf("%v", err)
		}
		return err
	}
	for _, n := range res.notes {
		a.infof("%s: %s", si.Name, n)
	}
	done := map[bool]string{false: "copied", true: "moved"}[c.move]
	line := fmt.Sprintf("%s %s (%s, %s)", done, si.Name, si.Area, humanBytes(res.size))
	st.names = append(st.names, si.Name)
	if res.same {
		st.same++
		line = fmt.Sprintf("%s %s (%s): an identical copy was already in %s", done, si.Name, si.Area, c.dst)
	} else {
		st.count++
	}
	if !a.quiet {
		a.printOut(line)
	}
	return nil
}

// claimedLater waits for the claims on segments held by others and moves
// those whose holder turns out gone.
func (c *copier) claimedLater(later []sink.Info, st *copyStats) error {
	a := c.a
	names := make([]string, len(later))
	for i, si := range later {
		names[i] = si.Name
	}
	free, live, err := a.awaitClaims(c.src, names)
	if err != nil {
		a.warnf("%v", err)
	}
	isFree := map[string]bool{}
	for _, n := range free {
		isFree[n] = true
	}
	for _, si := range later {
		if owner, ok := live[si.Name]; ok {
			st.failed++
			a.warnf("%s is being restored by %q (its claim is renewed), not moved", c.src.segPath(si.Area, si.Name), owner)
			continue
		}
		if !isFree[si.Name] {
			st.failed++
			a.warnf("%s is claimed by another process, and its claim could not be checked: not moved", c.src.segPath(si.Area, si.Name))
			continue
		}
		if a.interrupted() {
			break
		}
		if err := c.one(si, st); errors.Is(err, errClaimedSeg) {
			st.failed++
			a.warnf("%s was claimed again meanwhile, not moved", c.src.segPath(si.Area, si.Name))
		} else if err != nil && a.interrupted() {
			return err
		}
	}
	return nil
}

func sameNote(same int) string {
	if same == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d already there)", same)
}

// copyOne copies one segment and, with move, deletes the source once the
// copy is published and read back.
func (c *copier) copyOne(si sink.Info) (copyResult, error) {
	if c.move && si.Area == sink.AreaReady {
		return c.moveReady(si)
	}
	return c.copyPlain(si)
}

// stopTimeout bounds the writes that end a claim after an interrupt.
const stopTimeout = 10 * time.Second

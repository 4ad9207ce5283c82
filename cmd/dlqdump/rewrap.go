package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func newRewrapCmd(a *app) *cobra.Command {
	var (
		area       string
		recipients []string
		recFiles   []string
	)
	cmd := &cobra.Command{
		Use:   "rewrap LOCATION [SEGMENT...] --recipient R... [--identity FILE]",
		Short: "Wrap the data keys of encrypted segments for new recipients (key rotation)",
		Long: `Wrap the data key of each encrypted segment (all, or the named ones) anew for
the recipients given, and for them only: segments that the old keys read
become readable with the new ones alone. The blocks are not decrypted or
sealed again: each segment is copied, block for block, into a new segment
with a new header and key section, published under a new name (the same
time, so it keeps its place), and the old one is deleted. An identity that
unwraps the old key is needed (--identity, $DLQDUMP_IDENTITY,
$DLQDUMP_AWS_KMS). Every block's checksum and authentication is verified on
the way; a damaged segment is left as it is (see verify --salvage).

A ready segment is claimed first, like a restorer claims it, so no restorer
feeds it meanwhile; its restore progress moves with it. The copy is
published pending on the original (no restorer takes it while the original
is ready) and the original remembers its copy, so an interrupted rewrap
never delivers a record twice: a restorer that takes the original over
finishes it when the copy is there, and restores it when it is not. A
segment whose claim another process holds is waited for: left in place if
the claim is renewed (exit status 1), taken over after its lease if not (a
restore or a rewrap that was killed). Archived segments are rewrapped too;
quarantined ones are not (release them first). Run an interrupted rewrap
again with the new identity too (--identity OLD --identity NEW): what it
rewrapped already is read with the new key.

Recipients: --recipient age1... (age X25519), age1pq1... (post-quantum),
"ssh-ed25519 AAAA..." or "ssh-rsa AAAA..." (SSH public keys), awskms:KEY
(an AWS KMS key ID, ARN or alias, with the AWS environment's credentials);
--recipients-file FILE reads age and SSH recipients, one per line.`,
		Example: `  dlqdump rewrap /var/lib/app/dlq --identity old.key --recipient age1new... --recipient age1backup...
  DLQDUMP_AWS_KMS=any dlqdump rewrap s3://dead-letters/orders/ --recipient awskms:alias/dlq-2027`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var recs []envelope.Recipient
			for _, s := range recipients {
				r, err := a.parseRecipientArg(s)
				if err != nil {
					return err
				}
				recs = append(recs, r)
			}
			for _, p := range recFiles {
				f, err := os.Open(p)
				if err != nil {
					return usageErrorf("--recipients-file: %v", err)
				}
				rs, err := envelope.ParseRecipients(f)
				f.Close()
				if err != nil {
					return usageErrorf("--recipients-file %s: %v", p, err)
				}
				recs = append(recs, rs...)
			}
			if len(recs) == 0 {
				return usageErrorf("rewrap: give at least one --recipient or --recipients-file")
			}
			if a.lease < claims.MinLease {
				return usageErrorf("--lease %s: want at least %s", a.lease, claims.MinLease)
			}
			areas, err := areasFlag(cmd.Flags(), area, args[1:], "all")
			if err != nil {
				return err
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			infos, err := a.list(l, areas, args[1:])
			if err != nil {
				return err
			}
			return a.rewrapAll(l, infos, recs)
		}),
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&recipients, "recipient", nil, "new recipient: age1..., age1pq1..., an SSH public key, or awskms:KEY (repeatable)")
	fl.StringArrayVar(&recFiles, "recipients-file", nil, "file of age and SSH recipients, one per line (repeatable)")
	fl.StringVar(&area, "area", "all", "ready, archive or all (quarantined segments are not rewrapped)")
	fl.DurationVar(&a.lease, "lease", defaultLease, "claim lease on each ready segment, renewed every third of it")
	_ = fl.MarkHidden("lease")
	return cmd
}

// rewrapAll rewraps each segment of infos, reporting each. A segment whose
// claim another process holds is waited for, as mv waits: left to a holder
// that renews its claim, taken over from one that does not (a restore or a
// rewrap that was killed).
func (a *app) rewrapAll(l *location, infos []sink.Info, recs []envelope.Recipient) error {
	var done, plain, failed int
	var later []sink.Info
	var rewrapped []string
	defer func() {
		if done > 0 {
			a.logChange(l, changelog.ActionRewrap, scopeOf("segments", rewrapped),
				fmt.Sprintf("rewrapped %s for %s", plural(done, "segment"), plural(len(recs), "recipient")), nil)
		}
	}()
	one := func(si sink.Info) {
		name, err := a.rewrapOne(l, si, recs)
		switch {
		case errors.Is(err, errNotEncrypted):
			plain++
		case err != nil:
			failed++
			a.warnf("%s: not rewrapped: %v", l.segPath(si.Area, si.Name), err)
		default:
			done++
			rewrapped = append(rewrapped, si.Name)
			a.printOut(fmt.Sprintf("rewrapped %s -> %s", si.Name, name))
		}
	}
	for _, si := range infos {
		if a.interrupted() {
			break
		}
		if err := a.rewrapClaimed(l, si, recs, one); errors.Is(err, claims.ErrClaimed) {
			later = append(later, si)
		}
	}
	if len(later) > 0 && !a.interrupted() {
		names := make([]string, len(later))
		for i, si := range later {
			names[i] = si.Name
		}
		free, live, err := a.awaitClaims(l, names)
		if err != nil {
			a.warnf("%v", err)
		}
		for _, si := range later {
			switch owner, held := live[si.Name]; {
			case a.interrupted():
			case held:
				failed++
				a.warnf("%s is being restored by %q (its claim is renewed), not rewrapped", l.segPath(si.Area, si.Name), owner)
			case slices.Contains(free, si.Name):
				one(si)
			default:
				failed++
				a.warnf("%s is claimed by another process, and its claim could not be checked: not rewrapped", l.segPath(si.Area, si.Name))
			}
		}
	}
	a.infof("rewrapped %s of %s; %s not encrypted", plural(done, "segment"), l, plural(plain, "segment"))
	if failed > 0 {
		return fmt.Errorf("%s not rewrapped", plural(failed, "segment"))
	}
	return nil
}

// rewrapClaimed rewraps si through one, unless its claim is held: then it
// returns an error wrapping claims.ErrClaimed and reports nothing.
func (a *app) rewrapClaimed(l *location, si sink.Info, recs []envelope.Recipient, one func(sink.Info)) error {
	if si.Area == sink.AreaReady {
		c, err := a.claimerOf(l)
		if err == nil {
			if rec, alive, err := c.Inspect(a.ctx, si.Name); err == nil && rec != nil && rec.Held() && alive {
				return claims.ErrClaimed
			}
		}
	}
	one(si)
	return nil
}

var errNotEncrypted = errors.New("not encrypted")

// rewrapOne rewraps one segment and returns the name of its copy.
func (a *app) rewrapOne(l *location, si sink.Info, recs []envelope.Recipient) (string, error) {
	if si.Area == sink.AreaQuarantine {
		return "", fmt.Errorf("quarantined: release it first (dlqdump quarantine release)")
	}
	return a.replace(l, si, func(create func(string) (sink.SegmentWriter, error), publish func(sink.SegmentWriter, segCopy) error) error {
		return a.rewrapCopy(l, si, recs, create, publish)
	})
}

// rewrapCopy writes the copy of a segment with its key wrapped for recs into
// the segment create starts for the copy's name, and calls publish to publish
// it into the segment's area (publish commits sw), then reads the copy back:
// its blocks must verify.
func (a *app) rewrapCopy(l *location, si sink.Info, recs []envelope.Recipient, create func(name string) (sink.SegmentWriter, error), publish func(sw sink.SegmentWriter, c segCopy) error) error {
	ctx := a.ctx
	f, err := l.reader.Open(ctx, si.Area, si.Name)
	if err != nil {
		return err
	}
	defer f.Close()
	plainR, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
	if err != nil {
		return err
	}
	if !plainR.Header().Encrypted {
		return errNotEncrypted
	}
	ro, err := a.readerOptions(si.Name)
	if err != nil {
		return err
	}
	if ro.Keys == nil {
		return keyHint(plainR.KeyError())
	}
	sr, err := segment.NewReaderContext(ctx, f, f.Size(), ro)
	if err != nil {
		return keyHint(err)
	}
	wrapped, err := envelope.Wrap(ctx, sr.DataKey().Key, recs...)
	if err != nil {
		return err
	}
	created := sr.Header().Created
	id := segment.NewID(created)
	name := segment.FileName(created, id)
	sw, err := create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", l.segPath(si.Area, name), err)
	}
	shift, err := segment.Rewrap(sw, sr, id, created, wrapped)
	if err == nil {
		err = publish(sw, segCopy{name: name, shift: shift, key: sr.DataKey().Key, origID: sr.Header().ID, copyID: id})
	}
	if err != nil {
		_ = sw.Abort()
		return err
	}
	return a.checkCopy(l, si.Area, name, wrapped)
}

// checkCopy reads a published copy back: every block verifies, and its
// header holds the new wrapped key.
func (a *app) checkCopy(l *location, area sink.Area, name string, wrapped []byte) error {
	f, err := l.reader.Open(a.ctx, area, name)
	if err != nil {
		return fmt.Errorf("read back %s: %w", l.segPath(area, name), err)
	}
	defer f.Close()
	r, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
	if err != nil {
		return fmt.Errorf("read back %s: %w", l.segPath(area, name), err)
	}
	if !r.Sealed() || string(r.WrappedKey()) != string(wrapped) {
		return fmt.Errorf("read back %s: not the copy written", l.segPath(area, name))
	}
	for {
		_, err := r.VerifyBlock()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read back %s: %w", l.segPath(area, name), err)
		}
	}
}

// putRecord writes the record of a segment not yet published (none may be
// there: an earlier attempt's copy has another name).
func (a *app) putRecord(l *location, name string, rec *claims.Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := l.reader.WriteRecord(a.ctx, name, data, ""); err != nil {
		return fmt.Errorf("write the claim record of %s: %w", l.segPath(sink.AreaReady, name), err)
	}
	return nil
}

// checkProgress checks the progress of segment si's record against its data
// key: an error unless it authenticates (or says nothing).
func (a *app) checkProgress(l *location, si sink.Info, raw json.RawMessage) error {
	prog, err := claims.ParseProgress(raw)
	if err != nil || prog.Empty() {
		return err
	}
	f, err := l.reader.Open(a.ctx, si.Area, si.Name)
	if err != nil {
		return err
	}
	defer f.Close()
	ro, err := a.readerOptions(si.Name)
	if err != nil {
		return err
	}
	sr, err := segment.NewReaderContext(a.ctx, f, f.Size(), ro)
	if err != nil {
		return keyHint(err)
	}
	if sr.DataKey() == nil {
		return keyHint(sr.KeyError())
	}
	if err := claims.VerifyProgress(raw, sr.DataKey().Key, sr.Header().ID); err != nil {
		return fmt.Errorf("%w: restore it first (a restorer moves it to quarantine)", err)
	}
	return nil
}

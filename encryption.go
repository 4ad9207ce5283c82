package dlqdump

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// ErrNoKey means a segment is encrypted and none of the identities given
// unwraps its data key (or none was given). The Restorer leaves such a
// segment in place, for a restorer that holds its key.
var ErrNoKey = segment.ErrNoKey

// Encryption configures encryption at rest (Config.Encryption): every
// segment the Queue writes gets a random data key that seals its blocks with
// AES-256-GCM after compression, stored in the segment wrapped for each of
// Recipients; a Restorer unwraps it with one of Identities. See docs/ENCRYPTION.md
// for what is and is not encrypted.
type Encryption struct {
	// Recipients can read the segments the Queue writes: the data key of
	// each segment is wrapped for every one of them when the segment is
	// started (a KMS recipient makes one call; while it fails, the Queue
	// keeps the records in memory and retries, as for a sink failure). envelope.ParseRecipient
	// reads age ("age1…") and SSH ("ssh-ed25519 …") public keys;
	// awskms.KMS.Recipient wraps with an AWS KMS key. Required for a Queue
	// (at most 32); a Restorer ignores it. Default none.
	Recipients []envelope.Recipient
	// Identities unwrap the data keys of the encrypted segments a Restorer
	// reads: age and SSH private keys (envelope.ReadIdentityFile),
	// awskms.KMS.Identity. A segment none of them unwraps is left in place
	// for another restorer (logged once, counted as Fail("no_key")) and not
	// opened again by this Restorer (make a new one with the right
	// identities); every pass that meets it counts it in
	// Report.NoKeySegments and returns an error wrapping ErrNoKey naming
	// it, also kept as Stats().LastError. A key service that cannot be
	// reached is tried again on the next pass. Its side
	// segments are written encrypted under its own key, so a Restorer needs
	// no recipients. A Queue ignores it. Default none.
	Identities []envelope.Identity
	// RequireEncrypted makes a Restorer quarantine the segments that are
	// not encrypted, with the reason, instead of restoring them: anyone
	// who can write to the store can write such a segment, while an
	// encrypted one must have been sealed under a key the identities
	// unwrap. Default false: segments written before encryption was turned
	// on are restored.
	RequireEncrypted bool
}

// check validates the Queue's encryption settings.
func (e *Encryption) checkQueue() error {
	if e == nil {
		return nil
	}
	switch {
	case len(e.Recipients) == 0:
		return fmt.Errorf("%w: Encryption.Recipients: required to encrypt (e.g. envelope.ParseRecipient(\"age1…\"))", ErrConfig)
	case len(e.Recipients) > envelope.MaxStanzas:
		return fmt.Errorf("%w: Encryption.Recipients: %d, at most %d", ErrConfig, len(e.Recipients), envelope.MaxStanzas)
	}
	for i, r := range e.Recipients {
		if r == nil {
			return fmt.Errorf("%w: Encryption.Recipients[%d]: nil", ErrConfig, i)
		}
	}
	return nil
}

// overhead returns what encryption adds to the smallest segment the Queue
// writes: the key section of its header (as envelope.WrappedSize counts
// the wrapped key) and one block's tag.
func (e *Encryption) overhead() (int64, error) {
	if e == nil {
		return 0, nil
	}
	n, err := envelope.WrappedSize(e.Recipients...)
	if err != nil {
		return 0, fmt.Errorf("%w: Encryption.Recipients: %w", ErrConfig, err)
	}
	return int64(segment.KeySectionSize(n)) + segment.TagSize, nil
}

// keyring returns the Restorer's key unwrapper: one without identities
// when e is nil, so that an encrypted segment is refused when opened (and
// left in place), not while its blocks are read.
func (e *Encryption) keyring() segment.KeyUnwrapper {
	if e == nil {
		return envelope.NewKeyring()
	}
	return envelope.NewKeyring(e.Identities...)
}

// segmentOptions returns the options of a new segment the Queue writes:
// with a summary unless NoSummary, with a new data key when encrypting.
func (q *Queue) segmentOptions() (*segment.WriterOptions, error) {
	o := &segment.WriterOptions{Summarize: !q.c.NoSummary, MaxSize: int64(q.c.Capacity)}
	e := q.c.Encryption
	if e == nil {
		return o, nil
	}
	dk, err := envelope.NewDataKey(q.ctx, e.Recipients...)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: new data key: %w", err)
	}
	o.Key = dk
	return o, nil
}

// readerOptions returns the options the Restorer reads segment name with.
func (r *Restorer) readerOptions(name string) *segment.ReaderOptions {
	o := &segment.ReaderOptions{Name: name, Keys: r.c.keys, MaxBlockSize: r.c.maxBlock}
	if e := r.c.Encryption; e != nil {
		o.RequireEncrypted = e.RequireEncrypted
	}
	return o
}

// handedOver finishes a segment that dlqdump rewrap copied into its
// successor (the progress's Successor), once the copy is published: every
// record to restore is in the copy, which becomes claimable once this one is
// gone. done is false when the copy is not there (the rewrap stopped before
// publishing it), or is not a copy of this segment (its record is not
// pending on it): the segment is then restored as usual.
func (g *segRun) handedOver() (done bool, err error) {
	f, err := g.r.c.Reader.Open(g.ctx, sink.AreaReady, g.prog.Successor)
	if errors.Is(err, sink.ErrNotFound) {
		g.prog.Successor = ""
		return false, nil
	}
	if err != nil {
		return true, err
	}
	_ = f.Close()
	rec, _, err := g.r.claimer.Inspect(g.ctx, g.prog.Successor)
	if err != nil {
		return true, err
	}
	if rec == nil || rec.State != claims.StatePending || rec.Parent != g.name {
		g.r.log.Warn("a restore progress names a copy that is not this segment's; restoring it", slog.String("segment", g.name), slog.String("copy", g.prog.Successor))
		g.prog.Successor = ""
		return false, nil
	}
	// The progress may not be the rewrap's (it is checked against the
	// key only once the segment is open, and a restorer without this
	// segment's key hands it over too): the copy must hold every block of
	// this one as it is, so that removing this one loses nothing.
	same, err := g.sameBlocks(g.prog.Successor)
	if err != nil {
		return true, err
	}
	if !same {
		g.r.mw.Fail("not_a_copy")
		g.r.log.Warn("a restore progress names as this segment's copy a segment that does not hold its blocks; restoring it", slog.String("segment", g.name), slog.String("copy", g.prog.Successor))
		g.prog.Successor = ""
		return false, nil
	}
	if g.dry {
		return true, nil
	}
	g.r.log.Info("a rewrapped copy of the segment is published: removing it", slog.String("segment", g.name), slog.String("copy", g.prog.Successor))
	return true, g.end(claims.Destination{Delete: true})
}

// openFailed handles a segment the Restorer could not open for a reason
// other than damage: without its key it is left in place (reported like a
// segment of another version under VersionKeep), and one that is not
// encrypted while encryption is required is quarantined. handled is false
// for any other error, which the caller returns (the segment is released
// and tried again).
func (g *segRun) openFailed(err error) (handled bool, _ error) {
	r := g.r
	switch {
	case errors.Is(err, segment.ErrNoKey):
		// Returned, for Run to count and name: a pass that restored
		// nothing because it could decrypt nothing must say so.
		if g.dry {
			return true, err // counted in NoKeySegments, its records unknown
		}
		r.mu.Lock()
		r.skip[g.name] = leftInPlace{reason: err.Error(), noKey: true}
		r.mu.Unlock()
		r.mw.Fail("no_key")
		r.log.Warn("leaving an encrypted segment in place: no identity unwraps its key", slog.String("segment", g.name), slog.Any("error", err))
		return true, err
	case errors.Is(err, segment.ErrUnencrypted):
		return true, g.quarantineWhole("unencrypted", "not encrypted, and Encryption.RequireEncrypted is set", 0)
	}
	return false, nil
}

// leftInPlace is why a Restorer leaves a segment in place on every pass.
type leftInPlace struct {
	reason string
	noKey  bool // no identity unwraps its key
}

// noKeyError is what a pass returns when it left encrypted segments in
// place for want of a key: it wraps ErrNoKey and names them.
type noKeyError struct {
	names []string
}

// maxNamed caps the segments a noKeyError names.
const maxNamed = 10

func (e *noKeyError) Error() string {
	names := e.names
	more := ""
	if len(names) > maxNamed {
		names, more = names[:maxNamed], fmt.Sprintf(" and %d more", len(e.names)-maxNamed)
	}
	n := "1 encrypted segment"
	if len(e.names) != 1 {
		n = fmt.Sprintf("%d encrypted segments", len(e.names))
	}
	return fmt.Sprintf("%v: %s left in place, no identity unwraps their data keys: %s%s", ErrNoKey, n, strings.Join(names, ", "), more)
}

func (e *noKeyError) Unwrap() error { return ErrNoKey }

// sameBlocks reports whether the sealed segment other holds the blocks of
// this sealed segment, byte for byte, as a rewrapped copy does (a new
// header and key section, the same blocks) and one dlqdump summarize made
// (a new header, the same blocks, a summary): everything this segment
// holds is then in the copy, read with the same data key when encrypted.
// Nothing is decrypted.
func (g *segRun) sameBlocks(other string) (bool, error) {
	ctx := g.ctx
	var encrypted []bool // of this segment, then other
	span := func(name string) (io.ReaderAt, int64, int64, func(), error) {
		f, err := g.r.c.Reader.Open(ctx, sink.AreaReady, name)
		if err != nil {
			return nil, 0, 0, nil, err
		}
		sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
		if err != nil || sr.Footer() == nil {
			f.Close()
			return nil, -1, -1, nil, nil
		}
		encrypted = append(encrypted, sr.Header().Encrypted)
		end := sr.Start()
		if bl := sr.Footer().Blocks; len(bl) > 0 {
			end = bl[len(bl)-1].End()
		}
		return f, sr.Start(), end, func() { f.Close() }, nil
	}
	a, aStart, aEnd, aClose, err := span(g.name)
	if err != nil || a == nil {
		return false, err
	}
	defer aClose()
	b, bStart, bEnd, bClose, err := span(other)
	if err != nil || b == nil {
		return false, err
	}
	defer bClose()
	if aEnd-aStart != bEnd-bStart || encrypted[0] != encrypted[1] {
		return false, nil
	}
	const chunk = 256 << 10
	x, y := make([]byte, chunk), make([]byte, chunk)
	for off := int64(0); off < aEnd-aStart; off += chunk {
		n := int(min(chunk, aEnd-aStart-off))
		if got, err := a.ReadAt(x[:n], aStart+off); got < n {
			return false, err
		}
		if got, err := b.ReadAt(y[:n], bStart+off); got < n {
			return false, err
		}
		if !bytes.Equal(x[:n], y[:n]) {
			return false, nil
		}
	}
	return true, nil
}

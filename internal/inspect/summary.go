package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Summary describes one segment: what its header and footer say, or what a
// scan of its blocks found when it is unsealed.
type Summary struct {
	Info  sink.Info
	Claim *Claim // the segment's record, nil if none
	Hdr   segment.Header
	Read  bool // the header was read
	Enc   Encryption
	// Sealed says the segment has a footer; Blocks, Records and Raw
	// (uncompressed bytes) and MinT, MaxT (its records' times) come from it
	// or, when unsealed, from a scan of its blocks.
	Sealed     bool
	Blocks     int
	Records    uint64
	Raw        uint64
	MinT, MaxT time.Time
	// Damage lists what is wrong: an unreadable header, a missing or
	// damaged footer, damaged blocks found by the scan of an unsealed
	// segment. Each error names the segment and the offset.
	Damage []error
	// Err is an error that is not damage (I/O, permissions).
	Err error
}

// State returns ready, claimed (a restorer holds its claim, or held it and
// has not been seen gone), quarantined or archived.
func (s *Summary) State() string {
	return State(s.Info, s.Claim)
}

// State returns the state of a segment with the claim record c (nil if
// none): ready, claimed, quarantined or archived.
func State(si sink.Info, c *Claim) string {
	switch si.Area {
	case sink.AreaQuarantine:
		return "quarantined"
	case sink.AreaArchive:
		return "archived"
	}
	if c != nil && c.Rec.Held() {
		return "claimed"
	}
	return "ready"
}

// Ratio returns raw bytes over stored bytes (the segment's size), 0 when
// unknown.
func (s *Summary) Ratio() float64 {
	if s.Info.Size <= 0 || s.Raw == 0 {
		return 0
	}
	return float64(s.Raw) / float64(s.Info.Size)
}

// Summarize reads a segment's header and footer; an unsealed segment is
// scanned block by block. No key is needed. path names the segment in
// errors.
func Summarize(ctx context.Context, rd sink.Reader, si sink.Info, claim *Claim, path string) *Summary {
	s := &Summary{Info: si, Claim: claim}
	f, err := rd.Open(ctx, si.Area, si.Name)
	if err != nil {
		s.Err = fmt.Errorf("open %s: %w", path, err)
		return s
	}
	defer f.Close()
	// Without keys: the header and footer are enough, and the blocks of
	// an unsealed encrypted segment are checked without its key.
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
	if err != nil {
		if IsCorrupt(err) {
			s.Damage = append(s.Damage, err)
		} else {
			s.Err = err
		}
		return s
	}
	s.Read, s.Hdr, s.Sealed = true, sr.Header(), sr.Sealed()
	s.Enc = EncryptionOf(sr)
	next := sr.NextBlock
	if sr.KeyError() != nil {
		next = sr.VerifyBlock
	}
	if ft := sr.Footer(); ft != nil {
		s.Blocks, s.Records, s.Raw = len(ft.Blocks), ft.Records, ft.RawBytes
		s.MinT, s.MaxT = ft.MinTime, ft.MaxTime
		return s
	}
	s.Damage = append(s.Damage, sr.FooterError())
	var minT, maxT int64
	for {
		if err := ctx.Err(); err != nil {
			s.Err = err
			return s
		}
		bi, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !IsCorrupt(err) {
				s.Err = err
				return s
			}
			s.Damage = append(s.Damage, err)
			continue
		}
		if s.Blocks == 0 {
			minT, maxT = bi.MinTime, bi.MaxTime
		}
		minT, maxT = min(minT, bi.MinTime), max(maxT, bi.MaxTime)
		s.Blocks++
		s.Records += uint64(bi.Count)
		s.Raw += uint64(bi.RawLen)
	}
	if s.Records > 0 {
		s.MinT, s.MaxT = time.Unix(0, minT).UTC(), time.Unix(0, maxT).UTC()
	}
	return s
}

// IsCorrupt reports whether err is damage (a *segment.CorruptError).
func IsCorrupt(err error) bool {
	var ce *segment.CorruptError
	return errors.As(err, &ce)
}

// IsBlockDamage reports whether err is the damage of a block, not of the
// header or the footer: what ls, stat and verify count as damaged blocks.
func IsBlockDamage(err error) bool {
	var ce *segment.CorruptError
	return errors.As(err, &ce) && ce.Block >= 0
}

// CountBlockDamage counts the damaged blocks among a segment's damage.
func CountBlockDamage(damage []error) int {
	n := 0
	for _, err := range damage {
		if IsBlockDamage(err) {
			n++
		}
	}
	return n
}

// Encryption says whether a segment is encrypted and for which kinds of
// recipient its data key is wrapped, read from its header without a key.
type Encryption struct {
	On    bool
	Kinds []string // one per recipient: "X25519", "ssh-ed25519", "dlqdump-kms", ...
}

// EncryptionOf returns the encryption of the segment sr reads.
func EncryptionOf(sr *segment.Reader) Encryption {
	if !sr.Header().Encrypted {
		return Encryption{}
	}
	kinds, _ := envelope.Stanzas(sr.WrappedKey()) // malformed: unwrapping says so
	return Encryption{On: true, Kinds: kinds}
}

// String describes the encryption in a few words: "no", or the kinds of
// recipient with their counts, e.g. "X25519×2,dlqdump-kms".
func (e Encryption) String() string {
	if !e.On {
		return "no"
	}
	if len(e.Kinds) == 0 {
		return "yes"
	}
	var order []string
	n := map[string]int{}
	for _, k := range e.Kinds {
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	for i, k := range order {
		if n[k] > 1 {
			order[i] = fmt.Sprintf("%s×%d", k, n[k])
		}
	}
	return strings.Join(order, ",")
}

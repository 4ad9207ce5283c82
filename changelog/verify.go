package changelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Anchor is an entry known from elsewhere, as Anchor.String gives it
	// ("SEQ:HASH"): Verify fails unless the log still holds that entry
	// with that hash. Default: none.
	Anchor string
}

// Anchor names an entry by its place and hash, to be kept outside the store
// and checked later (VerifyOptions.Anchor).
type Anchor struct {
	Seq  uint64
	Hash string
}

// String returns "SEQ:HASH".
func (a Anchor) String() string { return strconv.FormatUint(a.Seq, 10) + ":" + a.Hash }

// ParseAnchor parses "SEQ:HASH".
func ParseAnchor(s string) (Anchor, error) {
	seq, hash, ok := strings.Cut(s, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil || n == 0 || len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return Anchor{}, fmt.Errorf("dlqdump: change log anchor %q: want SEQ:HASH, e.g. 42:%s", s, strings.Repeat("0f", 32))
	}
	return Anchor{Seq: n, Hash: hash}, nil
}

// Verification is what Verify found.
type Verification struct {
	// Entries and Pages count what was read.
	Entries uint64
	Pages   int
	// Head is the last entry read, zero for an empty log: keep it
	// elsewhere to verify with later (VerifyOptions.Anchor).
	Head Anchor
	// Broken is the first entry that breaks the chain, with why; nil
	// when the chain holds.
	Broken *Break
}

// Break is where a chain breaks.
type Break struct {
	// Seq is the entry's place in the log (as it should be, counting
	// from the first entry), Page the page holding it.
	Seq  uint64
	Page uint64
	// Reason says what is wrong, e.g. "its hash does not match its
	// contents (changed after it was written)".
	Reason string
	// Entry is the entry as stored, when it could be read.
	Entry *Entry
}

// Error returns the break in words.
func (b *Break) Error() string {
	return fmt.Sprintf("entry %d (page %d): %s", b.Seq, b.Page, b.Reason)
}

// Verify reads the whole log and checks its chain: pages numbered from 1
// without a gap, each but the last full, entries numbered from 1 without a
// gap, each holding the hash of the one before and a hash of its own
// contents. It returns what it found; the error wraps ErrBroken (naming the
// first broken entry) when the chain is broken or the anchor not found, or
// is the store's when it cannot be read.
func (l *Log) Verify(ctx context.Context, opts VerifyOptions) (Verification, error) {
	var v Verification
	var anchor *Anchor
	if opts.Anchor != "" {
		a, err := ParseAnchor(opts.Anchor)
		if err != nil {
			return v, err
		}
		anchor = &a
	}
	ns, err := l.pages(ctx)
	if err != nil {
		return v, fmt.Errorf("dlqdump: change log: list its pages: %w", err)
	}
	broke := func(b *Break) (Verification, error) {
		v.Broken = b
		return v, fmt.Errorf("%w: %w", ErrBroken, b)
	}
	var prev *Entry
	anchorSeen := false
	for i, n := range ns {
		want := uint64(i + 1)
		next := v.Entries + 1
		if n != want {
			return broke(&Break{Seq: next, Page: want, Reason: fmt.Sprintf("page %d is missing (the next page is %d): its entries were removed", want, n)})
		}
		p, size, _, ok, err := l.readPage(ctx, n)
		switch {
		case errors.Is(err, ErrBroken):
			return broke(&Break{Seq: next, Page: n, Reason: "the page cannot be read: " + strings.TrimPrefix(err.Error(), ErrBroken.Error()+": ")})
		case err != nil:
			return v, err
		case !ok:
			return broke(&Break{Seq: next, Page: n, Reason: "the page was removed while being verified"})
		}
		v.Pages++
		if len(p.Entries) == 0 {
			return broke(&Break{Seq: next, Page: n, Reason: "the page holds no entry: its entries were removed"})
		}
		for j := range p.Entries {
			e := &p.Entries[j]
			seq := v.Entries + 1
			switch {
			case e.Seq != seq:
				return broke(&Break{Seq: seq, Page: n, Entry: e, Reason: fmt.Sprintf("it is numbered %d: entries before it were removed or added", e.Seq)})
			case prev == nil && e.Prev != "":
				return broke(&Break{Seq: seq, Page: n, Entry: e, Reason: "the first entry follows another: entries before it were removed"})
			case prev != nil && e.Prev != prev.Hash:
				return broke(&Break{Seq: seq, Page: n, Entry: e, Reason: fmt.Sprintf("it follows an entry of hash %.12s…, not the hash of entry %d (%.12s…): entry %d was changed, or entries were removed", e.Prev, prev.Seq, prev.Hash, prev.Seq)})
			case e.Hash != e.Sum():
				return broke(&Break{Seq: seq, Page: n, Entry: e, Reason: "its hash does not match its contents: it was changed after it was written"})
			}
			if anchor != nil && e.Seq == anchor.Seq {
				if e.Hash != anchor.Hash {
					return broke(&Break{Seq: seq, Page: n, Entry: e, Reason: fmt.Sprintf("the anchor says its hash is %.12s…, it is %.12s…: the log was rewritten from here or before", anchor.Hash, e.Hash)})
				}
				anchorSeen = true
			}
			prev = e
			v.Entries++
		}
		if i < len(ns)-1 && !p.full(size) {
			return broke(&Break{Seq: v.Entries + 1, Page: n, Reason: fmt.Sprintf("page %d is not full and yet a page follows it: entries after entry %d were removed", n, v.Entries)})
		}
	}
	if prev != nil {
		v.Head = Anchor{Seq: prev.Seq, Hash: prev.Hash}
	}
	if anchor != nil && !anchorSeen {
		return broke(&Break{Seq: anchor.Seq, Page: uint64(len(ns)), Reason: fmt.Sprintf("the anchor names entry %d, and the log ends at entry %d: the log was cut", anchor.Seq, v.Entries)})
	}
	return v, nil
}

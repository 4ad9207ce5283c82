package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// ErrUnencrypted means a segment is not encrypted and the reader was told to
// take only encrypted ones (ReaderOptions.RequireEncrypted).
var ErrUnencrypted = errors.New("dlqdump: segment not encrypted")

// readKeySection reads and checks the key section of an encrypted segment
// (its size checked against the caps by unmarshalHeader) and unwraps its
// data key with opts.Keys, if given.
func (r *Reader) readKeySection(ctx context.Context, opts *ReaderOptions) error {
	if r.start > r.size {
		return r.corrupt(HeaderSize, -1, fmt.Errorf("%w: key section of %d bytes, the segment has %d after its header (truncated)",
			ErrCorrupt, r.start-HeaderSize, r.size-HeaderSize))
	}
	b, err := r.read(HeaderSize, int(r.start-HeaderSize)) // at most keySectionFixed+MaxWrappedKey
	if err != nil {
		return err
	}
	salt, wrapped, err := parseKeySection(b)
	if err != nil {
		return r.corrupt(HeaderSize, -1, err)
	}
	wrapped = bytes.Clone(wrapped) // the window moves
	r.wrapped, r.salt = wrapped, salt
	if opts == nil || opts.Keys == nil {
		r.keyErr = &NoKeyError{Segment: r.name, Detail: "it is encrypted and no identity was given to read its records"}
		return nil
	}
	key, err := opts.Keys.UnwrapKey(ctx, wrapped)
	switch {
	case err == nil:
	case errors.Is(err, ErrNoKey):
		if e := (*NoKeyError)(nil); errors.As(err, &e) {
			return &NoKeyError{Segment: r.name, Detail: e.Detail, Tried: e.Tried}
		}
		return fmt.Errorf("%w (segment %s)", err, r.name) // another unwrapper's error
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrFormat):
		return r.corrupt(HeaderSize, -1, err)
	default:
		return fmt.Errorf("dlqdump: segment %s: unwrap its data key: %w", r.name, err)
	}
	if len(key) != KeySize {
		return r.corrupt(HeaderSize, -1, fmt.Errorf("%w: unwrapped data key of %d bytes, want %d", ErrCorrupt, len(key), KeySize))
	}
	if r.seal, err = newSealer(key, &salt, r.hdr.DataVersion); err != nil {
		return err
	}
	r.key = &DataKey{Key: key, Wrapped: wrapped}
	return nil
}

// WrappedKey returns the wrapped data key an encrypted segment's header
// holds (nil when it is not encrypted), as stored: no identity is needed.
func (r *Reader) WrappedKey() []byte { return r.wrapped }

// KeyError returns the error reading the records of an encrypted segment
// opened without ReaderOptions.Keys returns (wrapping ErrNoKey); nil when the
// segment is not encrypted or its key was unwrapped.
func (r *Reader) KeyError() error { return r.keyErr }

// openJob opens j's sealed stored bytes into the reader's storage for
// opened blocks; a block that is not sealed is left as it is. Failing
// authentication is damage, like a bad checksum.
func (r *Reader) openJob(j *blockJob) error {
	if j.seal == nil {
		return nil
	}
	storage, err := openJob(j.seal, j, r.plain[:0])
	r.plain = storage // r.plain's, or new memory: never the read window
	if err != nil {
		return r.corrupt(j.info.Offset, j.idx, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	return nil
}

// VerifyBlock moves to the next block and verifies it short of decompressing
// it: its header, its checksum and its place (sequence numbers, the
// footer's index) and, in an encrypted segment opened with its key, that it
// authenticates. Without the key it checks the checksum over the sealed
// bytes only, so damage is found but not a block replaced by someone who
// recomputed its checksum. It returns the block's description, io.EOF at
// the end, or a *CorruptError for a damaged block, after which the next
// call goes on with the next intact block. It never returns records; do not
// mix it with Next.
func (r *Reader) VerifyBlock() (BlockInfo, error) {
	r.dropBlock()
	r.verifying = true
	j, err := r.nextJob()
	r.verifying = false
	if err != nil {
		return BlockInfo{}, err
	}
	if err := r.openJob(&j); err != nil {
		return BlockInfo{}, err
	}
	return j.info, nil
}

// scanNext is what Scan reads the next block with: NextBlock, or
// VerifyBlock for an encrypted segment without its key.
func (r *Reader) scanNext() (BlockInfo, error) {
	if r.keyErr != nil {
		return r.VerifyBlock()
	}
	return r.NextBlock()
}

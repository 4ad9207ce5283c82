// Package envelope is dlqdump's envelope encryption: every encrypted
// segment gets a random data key (AES-256, package segment seals the blocks
// with it), and the data key is stored in the segment wrapped for one or
// more recipients. The wrapped key is an age file (filippo.io/age) whose
// content is the data key, so any age recipient can be one: X25519 keys
// ("age1…"), post-quantum hybrid keys ("age1pq1…"), SSH keys (ssh-ed25519,
// ssh-rsa), and a key management service through KMSRecipient.
//
// The Queue wraps each segment's key with NewDataKey; readers unwrap it
// with a Keyring of identities (age and SSH private keys, KMSIdentity);
// dlqdump rewrap wraps a key anew with Wrap, leaving the blocks as they are.
package envelope

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump/segment"
)

// Recipient wraps a data key for someone who will read the segments: an
// *age.X25519Recipient, an *age.HybridRecipient, an agessh recipient (see
// ParseRecipient), a *KMSRecipient, or any age.Recipient.
type Recipient = age.Recipient

// Identity unwraps data keys wrapped for one recipient: an
// *age.X25519Identity, an agessh identity (see ParseIdentities), a
// *KMSIdentity, or any age.Identity.
type Identity = age.Identity

// MaxStanzas caps the recipients a wrapped key may name. A wrapped key with
// more is refused before any identity tries it, so that a hostile segment
// cannot make a reader call its key service many times.
const MaxStanzas = 32

// ErrNoRecipients means a data key was to be wrapped for nobody.
var ErrNoRecipients = errors.New("dlqdump: no recipients to wrap the data key for")

// NewDataKey returns a new random data key wrapped for every one of
// recipients. ctx bounds the calls of recipients that make any (a
// ContextRecipient: a key service).
func NewDataKey(ctx context.Context, recipients ...Recipient) (*segment.DataKey, error) {
	key := make([]byte, segment.KeySize)
	_, _ = rand.Read(key) // crypto/rand.Read never fails on supported platforms.
	wrapped, err := Wrap(ctx, key, recipients...)
	if err != nil {
		return nil, err
	}
	return &segment.DataKey{Key: key, Wrapped: wrapped}, nil
}

// Wrap wraps key for every one of recipients: an age file whose content is
// key. Used to make a segment's key readable by other recipients (key
// rotation, dlqdump rewrap). ctx bounds the calls of recipients that make
// any (a ContextRecipient: a key service).
func Wrap(ctx context.Context, key []byte, recipients ...Recipient) ([]byte, error) {
	if len(recipients) == 0 {
		return nil, ErrNoRecipients
	}
	if len(recipients) > MaxStanzas {
		return nil, fmt.Errorf("dlqdump: wrap data key: %d recipients, at most %d", len(recipients), MaxStanzas)
	}
	bound := make([]Recipient, len(recipients))
	for i, r := range recipients {
		bound[i] = r
		if cr, ok := r.(ContextRecipient); ok {
			bound[i] = boundRecipient{r: cr, ctx: ctx}
		}
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, bound...)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: wrap data key: %w", err)
	}
	if _, err := w.Write(key); err != nil {
		return nil, fmt.Errorf("dlqdump: wrap data key: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("dlqdump: wrap data key: %w", err)
	}
	if buf.Len() > segment.MaxWrappedKey {
		return nil, fmt.Errorf("dlqdump: wrap data key: %d bytes wrapped for %d recipients, more than a segment holds (%d)", buf.Len(), len(recipients), segment.MaxWrappedKey)
	}
	return buf.Bytes(), nil
}

// defaultStanzaBound is what WrappedSize counts for a ContextRecipient that
// does not say how large its stanza can be.
const defaultStanzaBound = 2 << 10

// WrappedSize returns how many bytes a data key wrapped for recipients takes
// (NewDataKey, Wrap), without calling a key service: the recipients that
// wrap locally (age and SSH keys) wrap a throwaway key, so that their
// stanzas are counted exactly; a ContextRecipient (a key service) is not
// called and counts its MaxStanzaSize() if it has that method (a
// KMSRecipient: a ciphertext of up to MaxKMSCiphertext bytes), else 2 KiB.
// The Queue counts it in Config.Capacity.
func WrappedSize(recipients ...Recipient) (int, error) {
	if len(recipients) == 0 {
		return 0, ErrNoRecipients
	}
	var local []Recipient
	bound := 0
	for _, r := range recipients {
		if _, ok := r.(ContextRecipient); !ok {
			local = append(local, r)
			continue
		}
		if s, ok := r.(interface{ MaxStanzaSize() int }); ok {
			bound += s.MaxStanzaSize()
		} else {
			bound += defaultStanzaBound
		}
	}
	if len(local) == 0 {
		return ageFixedSize + bound, nil
	}
	w, err := Wrap(context.Background(), make([]byte, segment.KeySize), local...)
	if err != nil {
		return 0, err
	}
	return len(w) + bound, nil
}

// ageFixedSize is what an age file holding a data key takes besides its
// stanzas: the version line, the MAC line and the payload (nonce, key, tag).
const ageFixedSize = len("age-encryption.org/v1\n") + len("--- \n") + 43 + 16 + segment.KeySize + 16

// stanzaBodySize returns the size of a stanza body of n bytes: unpadded
// base64 in lines of 64 columns, the last one shorter (empty when the
// others hold it all).
func stanzaBodySize(n int) int {
	b64 := (4*n + 2) / 3
	return b64 + b64/64 + 1
}

// Stanzas returns the kinds of recipient a wrapped key is wrapped for
// ("X25519", "ssh-ed25519", "dlqdump-kms", ...), one per recipient, read
// without unwrapping anything.
func Stanzas(wrapped []byte) ([]string, error) {
	if err := checkStanzas(wrapped); err != nil {
		return nil, err
	}
	var kinds []string
	for _, line := range bytes.Split(headerOf(wrapped), []byte("\n")) {
		if f := bytes.Fields(line); len(f) >= 2 && string(f[0]) == "->" {
			kinds = append(kinds, string(f[1]))
		}
	}
	return kinds, nil
}

// headerOf returns the age header of wrapped: up to its MAC line.
func headerOf(wrapped []byte) []byte {
	if i := bytes.Index(wrapped, []byte("\n---")); i >= 0 {
		return wrapped[:i]
	}
	return wrapped
}

// checkStanzas refuses wrapped keys that are not age files or name too
// many recipients.
func checkStanzas(wrapped []byte) error {
	if !bytes.HasPrefix(wrapped, []byte("age-encryption.org/v1\n")) {
		return fmt.Errorf("%w: wrapped data key is not an age file", segment.ErrCorrupt)
	}
	if n := bytes.Count(headerOf(wrapped), []byte("\n-> ")); n > MaxStanzas || n == 0 {
		return fmt.Errorf("%w: wrapped data key names %d recipients (1 to %d allowed)", segment.ErrCorrupt, n, MaxStanzas)
	}
	return nil
}

// Keyring unwraps the data keys of encrypted segments with its identities;
// it is the segment.KeyUnwrapper readers take (segment.ReaderOptions.Keys).
// It remembers the keys it unwrapped (the last 256), so that a segment
// opened again, or the segments sharing a key (a segment and its side
// segments), cost no key service call. It is safe for concurrent use.
type Keyring struct {
	ids []Identity

	mu    sync.Mutex
	cache map[[32]byte][]byte
	order [][32]byte
}

// keyringCache is how many unwrapped keys a Keyring keeps.
const keyringCache = 256

// NewKeyring returns a Keyring of identities.
func NewKeyring(identities ...Identity) *Keyring {
	return &Keyring{ids: identities, cache: map[[32]byte][]byte{}}
}

// Identities returns the Keyring's identities.
func (k *Keyring) Identities() []Identity { return k.ids }

// UnwrapKey unwraps a segment's data key. Its error wraps segment.ErrNoKey
// when no identity matches, segment.ErrCorrupt when the wrapped key is
// malformed or fails authentication (age's header MAC and payload tag), and
// is an identity's own error otherwise (a key service that cannot be
// reached: trying again may help). ctx bounds the calls of identities that
// make any (a ContextIdentity: a key service).
func (k *Keyring) UnwrapKey(ctx context.Context, wrapped []byte) ([]byte, error) {
	if err := checkStanzas(wrapped); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wrapped)
	k.mu.Lock()
	if key, ok := k.cache[sum]; ok {
		k.mu.Unlock()
		return bytes.Clone(key), nil
	}
	k.mu.Unlock()
	if len(k.ids) == 0 {
		return nil, &segment.NoKeyError{Detail: "no identity given"}
	}
	ids := make([]Identity, len(k.ids))
	for i, id := range k.ids {
		ids[i] = id
		if ci, ok := id.(ContextIdentity); ok {
			ids[i] = boundIdentity{id: ci, ctx: ctx}
		}
	}
	r, err := age.Decrypt(bytes.NewReader(wrapped), ids...)
	if err != nil {
		return nil, k.classify(err)
	}
	key, err := io.ReadAll(io.LimitReader(r, segment.KeySize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: wrapped data key: %v", segment.ErrCorrupt, err)
	}
	if len(key) != segment.KeySize {
		return nil, fmt.Errorf("%w: wrapped data key holds %d bytes, want %d", segment.ErrCorrupt, len(key), segment.KeySize)
	}
	k.mu.Lock()
	if _, ok := k.cache[sum]; !ok {
		if len(k.order) >= keyringCache {
			delete(k.cache, k.order[0])
			k.order = k.order[1:]
		}
		k.cache[sum] = bytes.Clone(key)
		k.order = append(k.order, sum)
	}
	k.mu.Unlock()
	return key, nil
}

// classify maps an error of age.Decrypt to the errors UnwrapKey documents.
func (k *Keyring) classify(err error) error {
	var nomatch *age.NoIdentityMatchError
	var svc *serviceError
	switch {
	case errors.As(err, &nomatch):
		return &segment.NoKeyError{Detail: fmt.Sprintf("none of the identities given matches the recipients its key is wrapped for (%s)", strings.Join(nomatch.StanzaTypes, ", ")), Tried: len(k.ids)}
	case errors.As(err, &svc):
		return svc.err // the key service's: not the segment's fault
	}
	return fmt.Errorf("%w: wrapped data key: %v", segment.ErrCorrupt, err)
}

// serviceError marks an identity's error that is not about the wrapped key:
// a key service that could not be asked.
type serviceError struct{ err error }

func (e *serviceError) Error() string { return e.err.Error() }
func (e *serviceError) Unwrap() error { return e.err }

package envelope

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
)

// KMS is a key management service that encrypts small secrets under keys it
// keeps: envelope wraps the age file key of a data key with it. Package
// envelope/awskms implements it on AWS KMS.
type KMS interface {
	// Encrypt encrypts plaintext under the service's key keyID.
	Encrypt(ctx context.Context, keyID string, plaintext []byte) (ciphertext []byte, err error)
	// Decrypt decrypts what Encrypt returned under keyID. Its error wraps
	// ErrKMSDenied when the service refuses: another key, no access, a
	// ciphertext it does not take; any other error means the service could
	// not be asked (trying again may help).
	Decrypt(ctx context.Context, keyID string, ciphertext []byte) (plaintext []byte, err error)
}

// ErrKMSDenied means a key service refused to decrypt: the key is not this
// identity's.
var ErrKMSDenied = errors.New("dlqdump: key service refused")

// KMSStanza is the type of the age recipient stanza a KMSRecipient writes:
// "-> dlqdump-kms KEYID" and the ciphertext the service returned.
const KMSStanza = "dlqdump-kms"

// defaultKMSTimeout bounds one call to a key service made under a context
// without a deadline.
const defaultKMSTimeout = 30 * time.Second

// ContextRecipient is a Recipient whose wrapping may block (a key service
// call): NewDataKey and Wrap call WrapContext with their context instead of
// Wrap, so that the caller's cancellation and deadline reach the call.
type ContextRecipient interface {
	Recipient
	WrapContext(ctx context.Context, fileKey []byte) ([]*age.Stanza, error)
}

// ContextIdentity is an Identity whose unwrapping may block (a key service
// call): Keyring.UnwrapKey calls UnwrapContext with its context instead of
// Unwrap.
type ContextIdentity interface {
	Identity
	UnwrapContext(ctx context.Context, stanzas []*age.Stanza) ([]byte, error)
}

// callContext returns the context of one key service call under ctx:
// bounded by timeout when it is set, else by ctx's deadline, else by
// defaultKMSTimeout, so that a call never waits for ever.
func callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultKMSTimeout)
}

// boundRecipient is a ContextRecipient bound to the context of one
// NewDataKey or Wrap, as age.Encrypt takes it.
type boundRecipient struct {
	r   ContextRecipient
	ctx context.Context
}

func (b boundRecipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	return b.r.WrapContext(b.ctx, fileKey)
}

// boundIdentity is a ContextIdentity bound to the context of one UnwrapKey,
// as age.Decrypt takes it.
type boundIdentity struct {
	id  ContextIdentity
	ctx context.Context
}

func (b boundIdentity) Unwrap(stanzas []*age.Stanza) ([]byte, error) {
	return b.id.UnwrapContext(b.ctx, stanzas)
}

// KMSRecipient wraps data keys with a key service's key.
type KMSRecipient struct {
	// KMS is the service. Required.
	KMS KMS
	// KeyID names the service's key (for AWS KMS a key ID, ARN or alias).
	// Required; no spaces.
	KeyID string
	// Timeout bounds each call to the service. Default: the deadline of
	// the caller's context (the Queue's, NewDataKey's, Wrap's), or 30s when
	// it has none or the recipient is used without one (age.Encrypt).
	Timeout time.Duration
}

// Wrap wraps an age file key with the service: one stanza naming KeyID.
// It is WrapContext without a context of the caller's: NewDataKey and Wrap
// call WrapContext.
func (r *KMSRecipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	return r.WrapContext(context.Background(), fileKey)
}

// WrapContext is Wrap, the call to the service made under ctx.
func (r *KMSRecipient) WrapContext(ctx context.Context, fileKey []byte) ([]*age.Stanza, error) {
	if r.KMS == nil || r.KeyID == "" || strings.ContainsAny(r.KeyID, " \t\r\n") {
		return nil, fmt.Errorf("dlqdump: KMSRecipient: KMS and a KeyID without spaces are required")
	}
	ctx, cancel := callContext(ctx, r.Timeout)
	defer cancel()
	ct, err := r.KMS.Encrypt(ctx, r.KeyID, fileKey)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: key service: encrypt with key %s: %w", r.KeyID, err)
	}
	return []*age.Stanza{{Type: KMSStanza, Args: []string{r.KeyID}, Body: ct}}, nil
}

// String returns "kms:KEYID".
func (r *KMSRecipient) String() string { return "kms:" + r.KeyID }

// MaxKMSCiphertext is the largest ciphertext of a file key that
// WrappedSize counts for a KMSRecipient: AWS KMS returns about 180 bytes for
// the 16 bytes of a file key under a symmetric key.
const MaxKMSCiphertext = 512

// MaxStanzaSize returns the most bytes the stanza Wrap writes can take in
// a wrapped key: its line naming KeyID and a ciphertext of up to
// MaxKMSCiphertext bytes.
func (r *KMSRecipient) MaxStanzaSize() int {
	return len("-> "+KMSStanza+" ") + len(r.KeyID) + 1 + stanzaBodySize(MaxKMSCiphertext)
}

// KMSIdentity unwraps data keys wrapped by KMSRecipients of the same
// service.
type KMSIdentity struct {
	// KMS is the service. Required.
	KMS KMS
	// KeyIDs, when set, are the only keys tried: a stanza naming another
	// key is not sent to the service (a hostile segment cannot make the
	// reader ask the service about keys of its choosing). Default: every
	// key a stanza names.
	KeyIDs []string
	// Timeout bounds each call to the service. Default: the deadline of
	// the caller's context (Keyring.UnwrapKey's: the Restorer's, a
	// command's), or 30s when it has none or the identity is used without
	// one (age.Decrypt).
	Timeout time.Duration
}

// Unwrap asks the service to decrypt the stanzas it may: the first that
// decrypts gives the file key; a service that refuses all of them is
// age.ErrIncorrectIdentity, and one that cannot be asked an error of its
// own, which readers do not take for damage. It is UnwrapContext without a
// context of the caller's: Keyring.UnwrapKey calls UnwrapContext.
func (i *KMSIdentity) Unwrap(stanzas []*age.Stanza) ([]byte, error) {
	return i.UnwrapContext(context.Background(), stanzas)
}

// UnwrapContext is Unwrap, the calls to the service made under ctx.
func (i *KMSIdentity) UnwrapContext(ctx context.Context, stanzas []*age.Stanza) ([]byte, error) {
	var refused []error
	for _, s := range stanzas {
		if s.Type != KMSStanza || len(s.Args) != 1 {
			continue
		}
		if len(i.KeyIDs) > 0 && !slices.Contains(i.KeyIDs, s.Args[0]) {
			continue
		}
		cctx, cancel := callContext(ctx, i.Timeout)
		key, err := i.KMS.Decrypt(cctx, s.Args[0], s.Body)
		cancel()
		switch {
		case err == nil:
			return key, nil
		case errors.Is(err, ErrKMSDenied):
			refused = append(refused, err)
		default:
			return nil, &serviceError{fmt.Errorf("dlqdump: key service: decrypt with key %s: %w", s.Args[0], err)}
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("%w: %w", age.ErrIncorrectIdentity, errors.Join(refused...))
	}
	return nil, age.ErrIncorrectIdentity
}

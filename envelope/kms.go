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

// defaultKMSTimeout bounds one call to a key service.
const defaultKMSTimeout = 30 * time.Second

// KMSRecipient wraps data keys with a key service's key.
type KMSRecipient struct {
	// KMS is the service. Required.
	KMS KMS
	// KeyID names the service's key (for AWS KMS a key ID, ARN or alias).
	// Required; no spaces.
	KeyID string
	// Timeout bounds each call to the service. Default 30s.
	Timeout time.Duration
}

// Wrap wraps an age file key with the service: one stanza naming KeyID.
func (r *KMSRecipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	if r.KMS == nil || r.KeyID == "" || strings.ContainsAny(r.KeyID, " \t\r\n") {
		return nil, fmt.Errorf("dlqdump: KMSRecipient: KMS and a KeyID without spaces are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeoutOr(r.Timeout))
	defer cancel()
	ct, err := r.KMS.Encrypt(ctx, r.KeyID, fileKey)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: key service: encrypt with key %s: %w", r.KeyID, err)
	}
	return []*age.Stanza{{Type: KMSStanza, Args: []string{r.KeyID}, Body: ct}}, nil
}

// String returns "kms:KEYID".
func (r *KMSRecipient) String() string { return "kms:" + r.KeyID }

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
	// Timeout bounds each call to the service. Default 30s.
	Timeout time.Duration
}

// Unwrap asks the service to decrypt the stanzas it may: the first that
// decrypts gives the file key; a service that refuses all of them is
// age.ErrIncorrectIdentity, and one that cannot be asked an error of its
// own, which readers do not take for damage.
func (i *KMSIdentity) Unwrap(stanzas []*age.Stanza) ([]byte, error) {
	var refused []error
	for _, s := range stanzas {
		if s.Type != KMSStanza || len(s.Args) != 1 {
			continue
		}
		if len(i.KeyIDs) > 0 && !slices.Contains(i.KeyIDs, s.Args[0]) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeoutOr(i.Timeout))
		key, err := i.KMS.Decrypt(ctx, s.Args[0], s.Body)
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

func timeoutOr(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return defaultKMSTimeout
}

// Package awskms is envelope.KMS on AWS KMS
// (github.com/aws/aws-sdk-go-v2/service/kms): data keys' age file keys are
// encrypted with Encrypt under a symmetric KMS key and decrypted with
// Decrypt, both with a fixed encryption context, so that ciphertexts made
// by dlqdump are decrypted only for dlqdump.
package awskms

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqdump/dlqdump/envelope"
)

// Context is the encryption context of every call: KMS binds it to the
// ciphertext, and CloudTrail logs it.
var Context = map[string]string{"dlqdump": "segment data key"}

// Client is the part of *kms.Client this package calls.
type Client interface {
	Encrypt(ctx context.Context, in *kms.EncryptInput, opts ...func(*kms.Options)) (*kms.EncryptOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// KMS is envelope.KMS on an AWS KMS client.
type KMS struct {
	client Client
}

// New returns a KMS calling client (a *kms.Client, e.g.
// kms.NewFromConfig(cfg)).
func New(client Client) *KMS { return &KMS{client: client} }

// Recipient returns an envelope recipient wrapping data keys under the KMS
// key keyID (a key ID, key ARN, alias name or alias ARN; decryption needs
// kms:Decrypt on the key, encryption kms:Encrypt).
func (k *KMS) Recipient(keyID string) *envelope.KMSRecipient {
	return &envelope.KMSRecipient{KMS: k, KeyID: keyID}
}

// Identity returns an envelope identity unwrapping data keys wrapped under
// the KMS keys keyIDs (as recipients named them); none: any key a segment
// names.
func (k *KMS) Identity(keyIDs ...string) *envelope.KMSIdentity {
	return &envelope.KMSIdentity{KMS: k, KeyIDs: keyIDs}
}

// Encrypt encrypts plaintext under keyID.
func (k *KMS) Encrypt(ctx context.Context, keyID string, plaintext []byte) ([]byte, error) {
	out, err := k.client.Encrypt(ctx, &kms.EncryptInput{KeyId: aws.String(keyID), Plaintext: plaintext, EncryptionContext: Context})
	if err != nil {
		return nil, err
	}
	return out.CiphertextBlob, nil
}

// Decrypt decrypts ciphertext under keyID. KMS refusing (another key, no
// access, a disabled or deleted key, a ciphertext it does not take) is an
// error wrapping envelope.ErrKMSDenied.
func (k *KMS) Decrypt(ctx context.Context, keyID string, ciphertext []byte) ([]byte, error) {
	out, err := k.client.Decrypt(ctx, &kms.DecryptInput{KeyId: aws.String(keyID), CiphertextBlob: ciphertext, EncryptionContext: Context})
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("%w: %w", envelope.ErrKMSDenied, err)
		}
		return nil, err
	}
	return out.Plaintext, nil
}

// refused reports whether KMS answered that this identity cannot decrypt.
func refused(err error) bool {
	var (
		incorrect *types.IncorrectKeyException
		invalid   *types.InvalidCiphertextException
		notFound  *types.NotFoundException
		disabled  *types.DisabledException
		state     *types.KMSInvalidStateException
		usage     *types.InvalidKeyUsageException
		arn       *types.InvalidArnException
	)
	if errors.As(err, &incorrect) || errors.As(err, &invalid) || errors.As(err, &notFound) || errors.As(err, &disabled) ||
		errors.As(err, &state) || errors.As(err, &usage) || errors.As(err, &arn) {
		return true
	}
	var api interface{ ErrorCode() string }
	return errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException"
}

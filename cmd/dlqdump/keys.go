package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/smithy-go/logging"
	"github.com/spf13/pflag"

	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/envelope/awskms"
	"github.com/dlqdump/dlqdump/segment"
)

// Environment variables for keys.
const (
	// envIdentity names identity files, separated by the path list
	// separator (":" on Unix), read besides --identity.
	envIdentity = "DLQDUMP_IDENTITY"
	// envKMS names AWS KMS keys (IDs, ARNs or aliases, separated by
	// commas) whose data keys may be unwrapped with the AWS environment's
	// credentials, or "any" for whichever key a segment names.
	envKMS = "DLQDUMP_AWS_KMS"
)

const keysHelp = `Encrypted segments:
  Reading records of an encrypted segment (cat, stat --by, restore, verify of
  records, verify --salvage, rewrap) takes an identity that unwraps its data
  key: --identity FILE (repeatable; an age identities file, as dlqdump
  keygen or age-keygen writes it, or an unencrypted SSH private key), files
  in DLQDUMP_IDENTITY (separated by ":"), and AWS KMS keys in
  DLQDUMP_AWS_KMS (key IDs or ARNs separated by commas, or "any"), used
  with the AWS environment's credentials (AWS_ENDPOINT_URL_KMS overrides the
  endpoint). Without one, ls, cp, mv and verify still work: verify checks
  the checksums of the sealed bytes, not that they authenticate.
  dlqdump keygen -o FILE makes a key pair: the identity in FILE, the public
  key (age1..., for Config.Encryption.Recipients) on stdout.`

// keyFlags are the root's flags for identities.
type keyFlags struct {
	identities []string

	once sync.Once
	ring *envelope.Keyring
	err  error
}

func (f *keyFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.identities, "identity", nil, "identity file unwrapping the data keys of encrypted segments (age or SSH private key; repeatable; also $"+envIdentity+")")
}

// keys returns the Keyring of the identities given, nil when none is.
func (a *app) keys() (*envelope.Keyring, error) {
	f := &a.keyFlags
	f.once.Do(func() {
		ids, err := a.loadIdentities()
		if err != nil {
			f.err = err
			return
		}
		if len(ids) > 0 {
			f.ring = envelope.NewKeyring(ids...)
		}
	})
	return f.ring, f.err
}

// identities returns the identities given, none when none is.
func (a *app) identities() ([]envelope.Identity, error) {
	ring, err := a.keys()
	if ring == nil || err != nil {
		return nil, err
	}
	return ring.Identities(), nil
}

func (a *app) loadIdentities() ([]envelope.Identity, error) {
	files := append([]string(nil), a.keyFlags.identities...)
	if env := os.Getenv(envIdentity); env != "" {
		files = append(files, filepath.SplitList(env)...)
	}
	var ids []envelope.Identity
	for _, p := range files {
		got, err := envelope.ReadIdentityFile(p)
		if err != nil {
			return nil, usageErrorf("--identity: %v", err)
		}
		ids = append(ids, got...)
	}
	if env := strings.TrimSpace(os.Getenv(envKMS)); env != "" {
		k, err := a.awsKMS()
		if err != nil {
			return nil, err
		}
		var keys []string
		if env != "any" {
			for _, s := range strings.Split(env, ",") {
				if s = strings.TrimSpace(s); s != "" {
					keys = append(keys, s)
				}
			}
		}
		ids = append(ids, k.Identity(keys...))
	}
	return ids, nil
}

// awsKMS returns AWS KMS with the AWS environment's configuration.
func (a *app) awsKMS() (*awskms.KMS, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if a.s3.region != "" {
		opts = append(opts, config.WithRegion(a.s3.region))
	}
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS KMS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return awskms.New(kms.NewFromConfig(cfg, func(o *kms.Options) {
		if ep := os.Getenv("AWS_ENDPOINT_URL_KMS"); ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
	})), nil
}

// readerOptions returns the options a command reads segment name with:
// with the identities given, if any.
func (a *app) readerOptions(name string) (*segment.ReaderOptions, error) {
	ring, err := a.keys()
	if err != nil {
		return nil, err
	}
	o := &segment.ReaderOptions{Name: name}
	if ring != nil {
		o.Keys = ring
	}
	return o, nil
}

// keyHint adds to an error about a missing key how to give one: an
// identity when none was given, another one when those given do not match.
func keyHint(err error) error {
	if !errors.Is(err, segment.ErrNoKey) {
		return err
	}
	var nk *segment.NoKeyError
	if errors.As(err, &nk) && nk.Tried > 0 {
		return fmt.Errorf("%w (%s)", err, otherKeyHint)
	}
	return fmt.Errorf("%w (%s)", err, giveKeyHint)
}

// The hints of keyHint.
const (
	giveKeyHint  = "give --identity FILE, $" + envIdentity + " or $" + envKMS
	otherKeyHint = "give one its key is wrapped for: --identity FILE, $" + envIdentity + " or $" + envKMS
)

// parseRecipientArg parses a --recipient: an age or SSH public key, or
// awskms:KEY for an AWS KMS key.
func (a *app) parseRecipientArg(s string) (envelope.Recipient, error) {
	if key, ok := strings.CutPrefix(s, "awskms:"); ok {
		if key == "" {
			return nil, usageErrorf("--recipient awskms:KEY: the key ID or ARN is missing")
		}
		k, err := a.awsKMS()
		if err != nil {
			return nil, err
		}
		return k.Recipient(key), nil
	}
	r, err := envelope.ParseRecipient(s)
	if err != nil {
		return nil, usageErrorf("--recipient %q: %v", s, err)
	}
	return r, nil
}

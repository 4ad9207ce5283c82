package envelope_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/envelope/awskms"
	"github.com/dlqdump/dlqdump/envelope/awskms/kmstest"
	"github.com/dlqdump/dlqdump/segment"
)

// ctxKMS is an envelope.KMS that records the contexts of its calls and
// "encrypts" by prefixing the key ID. With block set, a call waits for its
// context to end and returns its error, having said on started that it
// waits.
type ctxKMS struct {
	block   bool
	started chan struct{}

	mu    sync.Mutex
	calls []context.Context
}

func (k *ctxKMS) record(ctx context.Context) error {
	k.mu.Lock()
	k.calls = append(k.calls, ctx)
	k.mu.Unlock()
	if k.block {
		k.started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (k *ctxKMS) last() context.Context {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[len(k.calls)-1]
}

func (k *ctxKMS) Encrypt(ctx context.Context, keyID string, plaintext []byte) ([]byte, error) {
	if err := k.record(ctx); err != nil {
		return nil, err
	}
	return append([]byte(keyID+":"), plaintext...), nil
}

func (k *ctxKMS) Decrypt(ctx context.Context, keyID string, ciphertext []byte) ([]byte, error) {
	if err := k.record(ctx); err != nil {
		return nil, err
	}
	return ciphertext[len(keyID)+1:], nil
}

type ctxKey struct{}

// TestKMSContext: NewDataKey, Wrap and Keyring.UnwrapKey make the key
// service calls under the caller's context: its values and cancellation
// reach the service, its deadline bounds the call; without a deadline (or
// called by age without a context) a call is bounded by 30s, and by
// Timeout when it is set.
func TestKMSContext(t *testing.T) {
	k := &ctxKMS{}
	rec := &envelope.KMSRecipient{KMS: k, KeyID: "k1"}
	id := &envelope.KMSIdentity{KMS: k}
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")

	dk, err := envelope.NewDataKey(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.last().Value(ctxKey{}); got != "caller" {
		t.Fatalf("Encrypt's context carries %v, not the caller's", got)
	}
	if _, ok := k.last().Deadline(); !ok {
		t.Fatal("Encrypt under a context without a deadline has none")
	}
	key, err := envelope.NewKeyring(id).UnwrapKey(ctx, dk.Wrapped)
	if err != nil || string(key) != string(dk.Key) {
		t.Fatalf("unwrapped %x, %v", key, err)
	}
	if got := k.last().Value(ctxKey{}); got != "caller" {
		t.Fatalf("Decrypt's context carries %v, not the caller's", got)
	}

	// The caller's deadline is the call's.
	dctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	want, _ := dctx.Deadline()
	if _, err := envelope.Wrap(dctx, dk.Key, rec); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.last().Deadline(); !got.Equal(want) {
		t.Fatalf("Encrypt's deadline %v, want the caller's %v", got, want)
	}
	// Timeout, when set, bounds it besides.
	short := &envelope.KMSIdentity{KMS: k, Timeout: time.Minute}
	if _, err := envelope.NewKeyring(short).UnwrapKey(dctx, dk.Wrapped); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.last().Deadline(); !got.Before(want) {
		t.Fatalf("with Timeout 1m, Decrypt's deadline %v is not before the caller's %v", got, want)
	}

	// Cancelling the caller's context ends a call in flight: an error
	// that is neither ErrNoKey nor damage.
	k.block, k.started = true, make(chan struct{})
	cctx, cancelCall := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := envelope.NewKeyring(&envelope.KMSIdentity{KMS: k}).UnwrapKey(cctx, dk.Wrapped)
		done <- err
	}()
	<-k.started
	cancelCall()
	err = <-done
	if !errors.Is(err, context.Canceled) || errors.Is(err, segment.ErrNoKey) || errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestWrappedSize: exact for age and SSH recipients, an upper bound for a
// KMS recipient (here the fake AWS KMS), whose service it does not call.
func TestWrappedSize(t *testing.T) {
	srv := kmstest.NewServer("k1")
	defer srv.Close()
	k := awskms.New(srv.Client())
	pub, _ := sshKey(t)
	sshRec, err := envelope.ParseRecipient(pub)
	if err != nil {
		t.Fatal(err)
	}
	x := newX25519(t).Recipient()
	kmsRec := k.Recipient(kmstest.ARN("k1"))
	for _, c := range []struct {
		name  string
		recs  []envelope.Recipient
		exact bool
	}{
		{"X25519", []envelope.Recipient{x}, true},
		{"X25519+ssh", []envelope.Recipient{x, sshRec}, true},
		{"kms", []envelope.Recipient{kmsRec}, false},
		{"X25519+kms", []envelope.Recipient{x, kmsRec}, false},
	} {
		calls := srv.Calls("Encrypt")
		n, err := envelope.WrappedSize(c.recs...)
		if err != nil {
			t.Fatal(err)
		}
		if srv.Calls("Encrypt") != calls {
			t.Fatalf("%s: WrappedSize called the key service", c.name)
		}
		dk, err := envelope.NewDataKey(context.Background(), c.recs...)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(dk.Wrapped); got > n || c.exact && got != n {
			t.Fatalf("%s: WrappedSize %d, a wrapped key takes %d", c.name, n, got)
		}
	}
	if _, err := envelope.WrappedSize(); !errors.Is(err, envelope.ErrNoRecipients) {
		t.Fatalf("no recipients: %v", err)
	}
}

package dlqdump_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// fakeKMS is an envelope.KMS that "encrypts" by prefixing the key ID and
// keeps the context of its last call. While block is set, a call says so
// on started, waits for its context to end and returns its error.
type fakeKMS struct {
	mu      sync.Mutex
	block   bool
	started chan struct{}
	last    context.Context
	ended   chan error // the error of each blocked call, once its context ended
}

func (k *fakeKMS) call(ctx context.Context) error {
	k.mu.Lock()
	k.last = ctx
	block := k.block
	k.mu.Unlock()
	if !block {
		return nil
	}
	k.started <- struct{}{}
	<-ctx.Done()
	k.ended <- ctx.Err()
	return ctx.Err()
}

func (k *fakeKMS) setBlock() {
	k.mu.Lock()
	k.block, k.started, k.ended = true, make(chan struct{}, 1), make(chan error, 16)
	k.mu.Unlock()
}

func (k *fakeKMS) lastCtx() context.Context {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last
}

func (k *fakeKMS) Encrypt(ctx context.Context, keyID string, plaintext []byte) ([]byte, error) {
	if err := k.call(ctx); err != nil {
		return nil, err
	}
	return append([]byte(keyID+":"), plaintext...), nil
}

func (k *fakeKMS) Decrypt(ctx context.Context, keyID string, ciphertext []byte) ([]byte, error) {
	if err := k.call(ctx); err != nil {
		return nil, err
	}
	return ciphertext[len(keyID)+1:], nil
}

type runKey struct{}

// TestRestorerKMSContext: the Restorer unwraps data keys under the context
// of its pass: Run's values reach the key service, and Close ends a call in
// flight (the pass returns; the segment stays ready).
func TestRestorerKMSContext(t *testing.T) {
	k := &fakeKMS{}
	dir := t.TempDir()
	st := encStore{name: "fs", writer: func() dlqdump.Writer { return &fs.Writer{Directory: dir} }, reader: &fs.Reader{Directory: dir}}
	items, good := encItems("kmsctx", 200)
	dumpEncrypted(t, st, items, &envelope.KMSRecipient{KMS: k, KeyID: "k1"})
	enc := &dlqdump.Encryption{Identities: []envelope.Identity{&envelope.KMSIdentity{KMS: k}}}

	k.setBlock()
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st.reader, Decoder: poisonDecoder{}, Queue: &collector{}, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), dlqdump.RunOptions{})
		done <- err
	}()
	<-k.started
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatalf("the pass closed while unwrapping: %v", err)
	}
	if err := <-k.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the key service call ended with %v, not cancelled by Close", err)
	}
	if n := len(areaNames(t, st.reader, sink.AreaReady)); n == 0 {
		t.Fatal("no segment left ready")
	}

	k.mu.Lock()
	k.block = false
	k.mu.Unlock()
	c := &collector{}
	r, err = dlqdump.NewRestorer(&dlqdump.Config{Reader: st.reader, Decoder: poisonDecoder{}, Queue: c, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.WithValue(context.Background(), runKey{}, "pass")
	if _, err := r.Run(ctx, dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := k.lastCtx().Value(runKey{}); got != "pass" {
		t.Fatalf("the key service was called under a context carrying %v, not the pass's", got)
	}
	checkDelivered(t, c.delivered(), good)
}

// TestQueueKMSContext: the Queue wraps data keys under the context of its
// sink calls: a Shutdown whose deadline passed ends a key service call in
// flight.
func TestQueueKMSContext(t *testing.T) {
	k := &fakeKMS{}
	k.setBlock()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: t.TempDir()}, Capacity: dlqdump.Megabyte,
		Encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{&envelope.KMSRecipient{KMS: k, KeyID: "k1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue("x"); err != nil {
		t.Fatal(err)
	}
	go func() { _ = q.Flush(context.Background()) }()
	<-k.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown stored the record while the key service never answered")
	}
	if err := <-k.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the key service call ended with %v, not cancelled by Shutdown", err)
	}
}

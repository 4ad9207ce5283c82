package envelope_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"golang.org/x/crypto/ssh"

	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/envelope/awskms"
	"github.com/dlqdump/dlqdump/envelope/awskms/kmstest"
	"github.com/dlqdump/dlqdump/segment"
)

func newX25519(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sshKey returns an ed25519 SSH key pair: the authorized_keys line and the
// OpenSSH private key file.
func sshKey(t *testing.T) (pub string, priv []byte) {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(sk, "test")
	if err != nil {
		t.Fatal(err)
	}
	return string(ssh.MarshalAuthorizedKey(sp)), pem.EncodeToMemory(block)
}

func unwrap(t *testing.T, wrapped []byte, ids ...envelope.Identity) ([]byte, error) {
	t.Helper()
	return envelope.NewKeyring(ids...).UnwrapKey(context.Background(), wrapped)
}

// TestRecipientsAndIdentities wraps a data key for an age X25519 key, an
// SSH key and a KMS key at once: each identity alone unwraps it, others
// do not.
func TestRecipientsAndIdentities(t *testing.T) {
	srv := kmstest.NewServer("k1", "k2")
	defer srv.Close()
	k := awskms.New(srv.Client())
	x := newX25519(t)
	pub, priv := sshKey(t)
	recs, err := envelope.ParseRecipients(strings.NewReader("# team\n" + x.Recipient().String() + "\n\n" + pub))
	if err != nil {
		t.Fatal(err)
	}
	sshIDs, err := envelope.ParseIdentities(bytes.NewReader(priv))
	if err != nil {
		t.Fatal(err)
	}
	xIDs, err := envelope.ParseIdentities(strings.NewReader("# created: now\n" + x.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	dk, err := envelope.NewDataKey(context.Background(), append(recs, k.Recipient(kmstest.ARN("k1")))...)
	if err != nil {
		t.Fatal(err)
	}
	if len(dk.Key) != segment.KeySize || bytes.Contains(dk.Wrapped, dk.Key) {
		t.Fatalf("data key %v", dk)
	}
	kinds, err := envelope.Stanzas(dk.Wrapped)
	if err != nil || strings.Join(kinds, ",") != "X25519,ssh-ed25519,"+envelope.KMSStanza {
		t.Fatalf("Stanzas = %v, %v", kinds, err)
	}
	for name, ids := range map[string][]envelope.Identity{
		"x25519": xIDs, "ssh": sshIDs, "kms": {k.Identity()}, "kms allowed": {k.Identity(kmstest.ARN("k1"))},
	} {
		key, err := unwrap(t, dk.Wrapped, ids...)
		if err != nil || !bytes.Equal(key, dk.Key) {
			t.Fatalf("%s: unwrapped %x, %v", name, key, err)
		}
	}
	for name, ids := range map[string][]envelope.Identity{
		"other x25519": {newX25519(t)}, "none": nil, "kms other key allowed": {k.Identity(kmstest.ARN("k2"))},
	} {
		_, err := unwrap(t, dk.Wrapped, ids...)
		if !errors.Is(err, segment.ErrNoKey) {
			t.Fatalf("%s: %v, want ErrNoKey", name, err)
		}
	}
}

// TestKMS exercises the KMS identity against the fake KMS: a refused key is
// not a match, a service that is down is neither a match nor damage, and
// the Keyring asks the service once per wrapped key.
func TestKMS(t *testing.T) {
	srv := kmstest.NewServer("k1", "k2")
	defer srv.Close()
	k := awskms.New(srv.Client())
	dk, err := envelope.NewDataKey(context.Background(), k.Recipient("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if srv.Calls("Encrypt") != 1 {
		t.Fatalf("%d Encrypt calls", srv.Calls("Encrypt"))
	}
	ring := envelope.NewKeyring(k.Identity())
	for range 3 {
		key, err := ring.UnwrapKey(context.Background(), dk.Wrapped)
		if err != nil || !bytes.Equal(key, dk.Key) {
			t.Fatalf("unwrapped %x, %v", key, err)
		}
	}
	if n := srv.Calls("Decrypt"); n != 1 {
		t.Fatalf("%d Decrypt calls for one wrapped key, want 1 (cached)", n)
	}
	// Down: an error that is neither ErrNoKey nor damage.
	srv.SetDown(true)
	_, err = envelope.NewKeyring(&envelope.KMSIdentity{KMS: k, Timeout: 5 * time.Second}).UnwrapKey(context.Background(), dk.Wrapped)
	if err == nil || errors.Is(err, segment.ErrNoKey) || errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("service down: %v", err)
	}
	if _, err := envelope.NewDataKey(context.Background(), k.Recipient("k1")); err == nil {
		t.Fatal("wrapped a key while the service is down")
	}
	srv.SetDown(false)
	// Refused: no match.
	srv.Deny("k1")
	if _, err := unwrap(t, dk.Wrapped, k.Identity()); !errors.Is(err, segment.ErrNoKey) {
		t.Fatalf("access denied: %v", err)
	}
	// A key that does not exist.
	if _, err := envelope.NewDataKey(context.Background(), k.Recipient("nope")); err == nil {
		t.Fatal("wrapped under a key that does not exist")
	}
}

// TestHostileWrappedKeys gives the Keyring wrapped keys that are not age
// files, name too many recipients, or were tampered with: damage, with no
// key service asked.
func TestHostileWrappedKeys(t *testing.T) {
	srv := kmstest.NewServer("k1")
	defer srv.Close()
	k := awskms.New(srv.Client())
	x := newX25519(t)
	dk, err := envelope.NewDataKey(context.Background(), x.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	many := "age-encryption.org/v1\n" + strings.Repeat("-> dlqdump-kms "+kmstest.ARN("k1")+"\nAAAA\n", envelope.MaxStanzas+1) + "--- AAAA\n"
	mac := bytes.Clone(dk.Wrapped)
	i := bytes.Index(mac, []byte("\n--- ")) + 6
	mac[i] ^= 1
	payload := bytes.Clone(dk.Wrapped)
	payload[len(payload)-1] ^= 1
	for name, w := range map[string][]byte{
		"garbage": []byte("not an age file"), "many stanzas": []byte(many), "header MAC": mac, "payload": payload,
		"truncated": dk.Wrapped[:len(dk.Wrapped)-10], "empty": nil,
	} {
		_, err := unwrap(t, w, x, k.Identity())
		if !errors.Is(err, segment.ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if n := srv.Calls("Decrypt"); n != 0 {
		t.Fatalf("%d key service calls for hostile wrapped keys", n)
	}
}

// TestParseErrorsKeepSecrets checks that parse errors never quote the keys.
func TestParseErrorsKeepSecrets(t *testing.T) {
	x := newX25519(t)
	secret := x.String()
	if _, err := envelope.ParseRecipients(strings.NewReader(secret)); err == nil || strings.Contains(err.Error(), secret[20:]) {
		t.Fatalf("a secret key as recipient: %v", err)
	}
	bad := secret[:len(secret)-2] + "xx"
	if _, err := envelope.ParseIdentities(strings.NewReader(bad)); err == nil || strings.Contains(err.Error(), bad[20:]) {
		t.Fatalf("a bad secret key: %v", err)
	}
	if _, err := envelope.ParseRecipient("age1notakey"); err == nil {
		t.Fatal("accepted a bad recipient")
	}
	if _, err := envelope.Wrap(context.Background(), make([]byte, 32)); !errors.Is(err, envelope.ErrNoRecipients) {
		t.Fatalf("Wrap for nobody: %v", err)
	}
}

// TestSegmentWithKeyring writes a segment under a data key wrapped for two
// recipients and reads it with each one's Keyring.
func TestSegmentWithKeyring(t *testing.T) {
	a, b := newX25519(t), newX25519(t)
	dk, err := envelope.NewDataKey(context.Background(), a.Recipient(), b.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, segment.Header{}, &segment.WriterOptions{Key: dk})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := w.Add(time.Now(), map[string]string{"i": "x"}, []byte(strings.Repeat("payload ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []envelope.Identity{a, b} {
		r, err := segment.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &segment.ReaderOptions{Keys: envelope.NewKeyring(id)})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if err != nil {
				break
			}
			n++
		}
		if n != 100 {
			t.Fatalf("read %d records", n)
		}
	}
	_, err = segment.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &segment.ReaderOptions{Name: "s.dlq", Keys: envelope.NewKeyring(newX25519(t))})
	if !errors.Is(err, segment.ErrNoKey) || !strings.Contains(err.Error(), "s.dlq") {
		t.Fatalf("a third identity: %v", err)
	}
}

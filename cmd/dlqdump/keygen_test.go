package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/envelope"
)

// Issue 20: the README named age-keygen, which nothing installs. dlqdump
// keygen makes a key pair whose public key encrypts a dump that the
// identity file then reads, never replaces a key file, and -y prints the
// public key again.
func TestKeygen(t *testing.T) {
	for _, pq := range []bool{false, true} {
		name := "x25519"
		if pq {
			name = "pq"
		}
		t.Run(name, func(t *testing.T) {
			key := filepath.Join(t.TempDir(), "ops.key")
			args := []string{"keygen", "-o", key}
			if pq {
				args = append(args, "--pq")
			}
			r := cli(t, 0, args...)
			public := strings.TrimSpace(r.stdout)
			prefix := "age1"
			if pq {
				prefix = "age1pq1"
			}
			if !strings.HasPrefix(public, prefix) || strings.Contains(public, "\n") {
				t.Fatalf("keygen printed %q, want one %s... public key", r.stdout, prefix)
			}
			st, err := os.Stat(key)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
			}
			text, _ := os.ReadFile(key)
			if !strings.Contains(string(text), "# public key: "+public+"\n") || !strings.Contains(string(text), "AGE-SECRET-KEY-") {
				t.Errorf("key file:\n%s", text)
			}

			rcp, err := envelope.ParseRecipient(public)
			if err != nil {
				t.Fatal(err)
			}
			dir, items := encryptedDump(t, 20, rcp)
			sameStrings(t, "cat --identity", payloads(t, cli(t, 0, "cat", dir, "--identity", key).stdout), items)

			again := cli(t, exitError, args...)
			if !strings.Contains(again.stderr, "exists: not replacing a key") {
				t.Errorf("a second keygen -o: %s", again)
			}
			if after, _ := os.ReadFile(key); string(after) != string(text) {
				t.Errorf("the key file was changed")
			}
			if y := cli(t, 0, "keygen", "-y", key); strings.TrimSpace(y.stdout) != public {
				t.Errorf("keygen -y: %s, want %s", y, public)
			}
		})
	}
	// To stdout: the identity on stdout, the public key on stderr.
	r := cli(t, 0, "keygen")
	if !strings.Contains(r.stdout, "AGE-SECRET-KEY-") || !strings.HasPrefix(r.stderr, "Public key: age1") {
		t.Errorf("keygen to stdout: %s", r)
	}
	if _, err := envelope.ParseIdentities(strings.NewReader(r.stdout)); err != nil {
		t.Errorf("keygen's output does not parse as identities: %v", err)
	}
}

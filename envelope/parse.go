package envelope

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"filippo.io/age/agessh"
)

// maxKeyFile caps the size of a recipients or identities file.
const maxKeyFile = 1 << 20

// ParseRecipient parses one public key: an age X25519 recipient
// ("age1…"), an age post-quantum hybrid recipient ("age1pq1…"), or an SSH
// public key ("ssh-ed25519 AAAA…", "ssh-rsa AAAA…", as in authorized_keys).
func ParseRecipient(s string) (Recipient, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "age1pq1"):
		return age.ParseHybridRecipient(s)
	case strings.HasPrefix(s, "age1"):
		return age.ParseX25519Recipient(s)
	case strings.HasPrefix(s, "ssh-"):
		return agessh.ParseRecipient(s)
	case strings.HasPrefix(s, "AGE-SECRET-KEY-"), strings.Contains(s, "PRIVATE KEY"):
		return nil, fmt.Errorf("dlqdump: a private key was given as a recipient; give its public key")
	}
	return nil, fmt.Errorf("dlqdump: unknown recipient (want age1…, age1pq1… or an ssh-ed25519/ssh-rsa public key)")
}

// ParseRecipients parses a recipients file: one recipient (ParseRecipient)
// per line; empty lines and lines starting with "#" are skipped.
func ParseRecipients(r io.Reader) ([]Recipient, error) {
	var out []Recipient
	sc := bufio.NewScanner(io.LimitReader(r, maxKeyFile))
	sc.Buffer(nil, 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rc, err := ParseRecipient(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, rc)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dlqdump: read recipients: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dlqdump: no recipients found")
	}
	return out, nil
}

// ParseIdentities parses an identities file: age secret keys
// ("AGE-SECRET-KEY-1…", one per line, "#" comments, as age-keygen writes
// them), or one SSH private key in PEM or OpenSSH form (ed25519 or RSA, not
// protected by a passphrase). Errors never quote the file's content.
func ParseIdentities(r io.Reader) ([]Identity, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("dlqdump: read identities: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("dlqdump: identities file larger than %d bytes", maxKeyFile)
	}
	if bytes.Contains(b, []byte("-----BEGIN")) {
		id, err := agessh.ParseIdentity(b)
		if err != nil {
			return nil, fmt.Errorf("dlqdump: SSH private key: %w", err)
		}
		return []Identity{id}, nil
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("dlqdump: age identities: %w", err)
	}
	return ids, nil
}

// ReadIdentityFile reads an identities file (ParseIdentities).
func ReadIdentityFile(path string) ([]Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ids, err := ParseIdentities(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ids, nil
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/envelope/awskms/kmstest"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// keyFile writes an age identity to a file and returns its path.
func keyFile(t *testing.T, id *age.X25519Identity) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(p, []byte("# test key\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func genIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// encryptedDump dumps n items into a new directory, encrypted for recipients,
// and returns the directory and the items.
func encryptedDump(t *testing.T, n int, recipients ...envelope.Recipient) (string, []string) {
	t.Helper()
	return encryptedDumpSized(t, n, 8*dlqdump.Kilobyte, recipients...)
}

// encryptedDumpSized is encryptedDump with segments of capacity bytes.
func encryptedDumpSized(t *testing.T, n int, capacity dlqdump.MemorySize, recipients ...envelope.Recipient) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: capacity,
		BlockSize: dlqdump.Kilobyte, Encryption: &dlqdump.Encryption{Recipients: recipients}})
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for i := range n {
		it := fmt.Sprintf(`{"order":%d,"note":"%s"}`, i, strings.Repeat("n", i%30))
		items = append(items, it)
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, items
}

// payloads returns the payloads of cat or restore JSON lines, sorted.
func payloads(t *testing.T, out string) []string {
	t.Helper()
	var ps []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var v struct{ Payload json.RawMessage }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		var s string
		if err := json.Unmarshal(v.Payload, &s); err != nil {
			s = string(v.Payload)
		}
		ps = append(ps, s)
	}
	sort.Strings(ps)
	return ps
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func sameStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(sorted(want), "\n") {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
}

// TestEncryptedCLI: reading commands need an identity (and say so), verify
// checks checksums without one, cp copies encrypted bytes, and rewrap makes
// the segments readable by the new recipient only, on a directory, gofakes3
// and versitygw.
func TestEncryptedCLI(t *testing.T) {
	a, b, c := genIdentity(t), genIdentity(t), genIdentity(t)
	ka, kb, kc := keyFile(t, a), keyFile(t, b), keyFile(t, c)
	dir, items := encryptedDump(t, 400, a.Recipient(), b.Recipient())

	r := cli(t, exitError, "cat", dir)
	if !strings.Contains(r.stderr, "is encrypted") || !strings.Contains(r.stderr, "--identity") {
		t.Fatalf("cat without identity: %s", r)
	}
	sameStrings(t, "cat --identity a", payloads(t, cli(t, 0, "cat", dir, "--identity", ka).stdout), items)
	sameStrings(t, "cat with $DLQDUMP_IDENTITY b", payloads(t, cliEnv(t, []string{envIdentity + "=" + kb}, 0, "cat", dir).stdout), items)
	r = cli(t, exitError, "cat", dir, "--identity", kc)
	if !strings.Contains(r.stderr, "none of the identities") {
		t.Fatalf("cat with another identity: %s", r)
	}
	r = cli(t, 0, "verify", dir)
	if !strings.Contains(r.stdout, "checksums only") || !strings.Contains(r.stdout, fmt.Sprintf("%d intact records", len(items))) {
		t.Fatalf("verify without a key: %s", r)
	}
	if r = cli(t, 0, "verify", dir, "--identity", ka); strings.Contains(r.stdout, "checksums only") {
		t.Fatalf("verify with a key: %s", r)
	}
	cli(t, 0, "ls", dir)

	forEachS3(t, func(t *testing.T, srv *s3test.Server, loc string) {
		r := cliS3(t, srv, 0, "cp", dir, loc)
		if !strings.Contains(r.stderr, "copied") {
			t.Fatalf("cp: %s", r)
		}
		cliS3(t, srv, 0, "verify", loc)
		sameStrings(t, "cat from S3", payloads(t, cliS3(t, srv, 0, "cat", loc, "--identity", kb).stdout), items)

		// A restore delivers part, then rewrap for c alone carries its
		// progress: the rest is delivered with c's key, once.
		first := payloads(t, cliS3(t, srv, 0, "restore", loc, "--identity", ka, "--limit", "50").stdout)
		if len(first) != 50 {
			t.Fatalf("restore --limit 50 delivered %d", len(first))
		}
		r = cliS3(t, srv, 0, "rewrap", loc, "--identity", ka, "--recipient", c.Recipient().String())
		if !strings.Contains(r.stdout, "rewrapped ") {
			t.Fatalf("rewrap: %s", r)
		}
		r = cliS3(t, srv, exitError, "cat", loc, "--identity", ka)
		if !strings.Contains(r.stderr, "none of the identities") {
			t.Fatalf("the old key after rewrap: %s", r)
		}
		r = cliS3(t, srv, exitError, "restore", loc)
		if !strings.Contains(r.stderr, "left in place") {
			t.Fatalf("restore without identity: %s", r)
		}
		rest := payloads(t, cliS3(t, srv, 0, "restore", loc, "--identity", kc).stdout)
		sameStrings(t, "restored in all", sorted(append(first, rest...)), items)
		for _, ar := range allAreas {
			if ls := cliS3(t, srv, 0, "ls", loc, "--area", ar.String(), "--json").stdout; ls != "" {
				t.Fatalf("%s segments left: %s", ar, ls)
			}
		}
	})
}

// TestEncryptedVerifyDamage flips a bit in a sealed block: verify finds it
// with the key and without, cat prints every other record and no record of
// the damaged block, and --salvage writes the intact records encrypted.
func TestEncryptedVerifyDamage(t *testing.T) {
	a := genIdentity(t)
	ka := keyFile(t, a)
	dir, items := encryptedDump(t, 2000, a.Recipient())
	names := areaNames(t, dir, sink.AreaReady)
	path := filepath.Join(dir, names[1])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r0, err := segment.NewReader(strings.NewReader(string(data)), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := r0.Footer().Blocks[0]
	data[blk.Offset+segment.BlockHeaderSize+2] ^= 4
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", dir}, {"verify", dir, "--identity", ka}} {
		r := cli(t, exitDamage, args...)
		if !strings.Contains(r.stdout, "DAMAGED "+names[1]) || !strings.Contains(r.stdout, "block checksum") {
			t.Fatalf("%v: %s", args, r)
		}
	}
	r := cli(t, exitDamage, "cat", dir, "--identity", ka)
	got := payloads(t, r.stdout)
	if len(got) != len(items)-int(blk.Count) {
		t.Fatalf("cat printed %d records, want %d", len(got), len(items)-int(blk.Count))
	}
	want := map[string]bool{}
	for _, it := range items {
		want[it] = true
	}
	for _, p := range got {
		if !want[p] {
			t.Fatalf("cat printed %q, which was not dumped", p)
		}
	}
	salv := t.TempDir()
	cli(t, exitDamage, "verify", dir, "--identity", ka, "--salvage", salv)
	r = cli(t, exitError, "cat", salv)
	if !strings.Contains(r.stderr, "is encrypted") {
		t.Fatalf("salvaged segment not encrypted: %s", r)
	}
	cli(t, 0, "cat", salv, "--identity", ka)
}

// TestEncryptedKMSCLI rewraps for an AWS KMS key (the fake KMS) and reads
// with $DLQDUMP_AWS_KMS.
func TestEncryptedKMSCLI(t *testing.T) {
	srv := kmstest.NewServer("dlq")
	defer srv.Close()
	a := genIdentity(t)
	dir, items := encryptedDump(t, 100, a.Recipient())
	env := []string{"AWS_ACCESS_KEY_ID=AKIAFAKE", "AWS_SECRET_ACCESS_KEY=fake", "AWS_REGION=us-east-1", "AWS_ENDPOINT_URL_KMS=" + srv.URL}
	cliEnv(t, env, 0, "rewrap", dir, "--identity", keyFile(t, a), "--recipient", "awskms:"+kmstest.ARN("dlq"))
	r := cliEnv(t, append(env, envKMS+"="+kmstest.ARN("dlq")), 0, "cat", dir)
	sameStrings(t, "cat with KMS", payloads(t, r.stdout), items)
	if srv.Calls("Decrypt") == 0 {
		t.Fatal("the KMS was not asked")
	}
	// A KMS key the reader does not allow is not asked about.
	r = cliEnv(t, append(env, envKMS+"=arn:aws:kms:us-east-1:111122223333:key/other"), exitError, "cat", dir)
	if !strings.Contains(r.stderr, "none of the identities") {
		t.Fatalf("cat with another KMS key: %s", r)
	}
}

package dlqdump_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
)

// TestCapacityCountsKeySection dumps records that do not compress into
// small encrypted segments, with the default BlockSize and the largest one
// allowed: no segment is larger than Capacity, key section included. With
// the default BlockSize, segments used to exceed it by about the key
// section (4481 bytes for a Capacity of 4 KiB and three recipients).
func TestCapacityCountsKeySection(t *testing.T) {
	const capacity = 4 * dlqdump.Kilobyte
	k := &fakeKMS{}
	for _, c := range []struct {
		name string
		recs []envelope.Recipient
	}{
		{"age×3", []envelope.Recipient{newIdentity(t).Recipient(), newIdentity(t).Recipient(), newIdentity(t).Recipient()}},
		{"age+kms", []envelope.Recipient{newIdentity(t).Recipient(), &envelope.KMSRecipient{KMS: k, KeyID: "arn:aws:kms:eu-west-1:111122223333:key/1234abcd"}}},
	} {
		for _, codec := range []dlqdump.Codec{dlqdump.NoCompression, dlqdump.Zstd} {
			for _, bs := range []dlqdump.MemorySize{0, 1 << 20} {
				cfg := &dlqdump.Config{Capacity: capacity, BlockSize: bs, Codec: codec, Encryption: &dlqdump.Encryption{Recipients: c.recs}}
				if bs != 0 {
					// The largest BlockSize allowed: 1 MiB is refused
					// with it in the error.
					cfg.Writer = &fs.Writer{Directory: t.TempDir()}
					_, err := dlqdump.NewQueue(cfg)
					var room int
					if !errors.Is(err, dlqdump.ErrConfig) || !scanRoom(err.Error(), &room) {
						t.Fatalf("%s: BlockSize 1 MiB: %v", c.name, err)
					}
					cfg.BlockSize = dlqdump.MemorySize(room)
				}
				dir := t.TempDir()
				cfg.Writer = &fs.Writer{Directory: dir}
				q, err := dlqdump.NewQueue(cfg)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				for range 300 {
					b := make([]byte, 40)
					_, _ = rand.Read(b)
					if err := q.Enqueue(hex.EncodeToString(b)); err != nil {
						t.Fatal(err)
					}
				}
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				ents, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, e := range ents {
					if e.IsDir() {
						continue
					}
					n++
					st, err := os.Stat(filepath.Join(dir, e.Name()))
					if err != nil {
						t.Fatal(err)
					}
					if st.Size() > int64(capacity) {
						t.Errorf("%s, codec %d, BlockSize %s: segment %s of %d bytes, Capacity %d", c.name, codec, cfg.BlockSize, e.Name(), st.Size(), capacity)
					}
				}
				if n < 3 {
					t.Fatalf("%s: %d segments", c.name, n)
				}
			}
		}
	}
}

// scanRoom reads "at most N bytes" from a BlockSize error.
func scanRoom(msg string, room *int) bool {
	m := regexp.MustCompile(`at most (\d+) bytes`).FindStringSubmatch(msg)
	if m == nil {
		return false
	}
	*room, _ = strconv.Atoi(m[1])
	return true
}

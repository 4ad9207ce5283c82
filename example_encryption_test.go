package dlqdump_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
)

// Encrypt the dump at rest: the Queue needs only the public key (the
// recipient), the Restorer the private key (the identity), kept in a file
// as age-keygen writes it. docs/ENCRYPTION.md shows this
// code.
func Example_encryption() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	key, _ := age.GenerateX25519Identity() // age-keygen -o dlq.key
	keyFile := filepath.Join(dir, "dlq.key")
	_ = os.WriteFile(keyFile, []byte(key.String()+"\n"), 0o600)
	publicKey := key.Recipient().String() // "age1..."
	dst := queueFunc(func(x any) error { fmt.Printf("restored %s\n", x); return nil })

	// README:begin
	// Dumping: each segment's data key is wrapped for every recipient.
	recipient, err := envelope.ParseRecipient(publicKey) // age1... or "ssh-ed25519 AAAA..."
	if err != nil {
		log.Fatal(err)
	}
	dump, err := dlqdump.NewQueue(&dlqdump.Config{
		Capacity:   16 * dlqdump.Megabyte,
		Writer:     &fs.Writer{Directory: dir},
		Encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{recipient}},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = dump.Enqueue("order-1")
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}

	// Restoring: any one identity that unwraps the data key.
	identities, err := envelope.ReadIdentityFile(keyFile) // age or SSH private key
	if err != nil {
		log.Fatal(err)
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader:     &fs.Reader{Directory: dir},
		Decoder:    decoder.Fallthrough{},
		Queue:      dst,
		Encryption: &dlqdump.Encryption{Identities: identities},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Run(context.Background(), dlqdump.RunOptions{}); err != nil {
		log.Fatal(err)
	}
	// README:end

	// Output: restored order-1
}

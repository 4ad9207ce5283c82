package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/envelope"
)

type keygenFlags struct {
	out    string
	pq     bool
	public string
}

func newKeygenCmd(a *app) *cobra.Command {
	var f keygenFlags
	cmd := &cobra.Command{
		Use:   "keygen [-o FILE] [--pq] | keygen -y FILE",
		Short: "Make an age key pair for encrypted dumps (no age-keygen needed)",
		Long: `Make a new age identity (private key) for Config.Encryption and
--identity, in the file format age-keygen writes:

  # created: 2026-03-01T12:00:00Z
  # public key: age1...
  AGE-SECRET-KEY-1...

With -o FILE the identity is written to FILE (created with mode 0600; an
existing FILE is never replaced) and its public key, the recipient to give
Config.Encryption.Recipients or dlqdump rewrap --recipient, is printed on
stdout. Without -o the identity is printed on stdout and the public key on
stderr. --pq makes a post-quantum hybrid key (age1pq1...). -y FILE prints
the public keys of the identities in FILE.`,
		Example: `  dlqdump keygen -o ~/.config/dlq/ops.key        # prints age1...
  dlqdump keygen -y ~/.config/dlq/ops.key`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if f.public != "" {
				if f.out != "" || f.pq {
					return usageErrorf("-y: give no other flag")
				}
				return a.keygenPublic(f.public)
			}
			return a.keygen(&f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.out, "output", "o", "", "write the identity to this file (mode 0600, never replaced) and print its public key")
	fl.BoolVar(&f.pq, "pq", false, "a post-quantum hybrid key (age1pq1...) instead of X25519")
	fl.StringVarP(&f.public, "public", "y", "", "print the public keys of the identities in this file")
	return cmd
}

// identity is what keygen makes: an X25519 or a hybrid age identity.
type identity interface {
	String() string
}

func (a *app) keygen(f *keygenFlags) error {
	var id identity
	var public string
	if f.pq {
		h, err := age.GenerateHybridIdentity()
		if err != nil {
			return err
		}
		id, public = h, h.Recipient().String()
	} else {
		x, err := age.GenerateX25519Identity()
		if err != nil {
			return err
		}
		id, public = x, x.Recipient().String()
	}
	text := fmt.Sprintf("# created: %s\n# public key: %s\n%s\n", time.Now().UTC().Format(time.RFC3339), public, id.String())
	if f.out == "" {
		if _, err := fmt.Fprint(a.stdout, text); err != nil {
			return err
		}
		a.printErr("Public key: " + public)
		return nil
	}
	file, err := os.OpenFile(f.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: not replacing a key (it may be the only one that reads some segments)", f.out)
	}
	if err != nil {
		return err
	}
	_, err = file.WriteString(text)
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.out)
		return fmt.Errorf("write %s: %w", f.out, err)
	}
	_, err = fmt.Fprintln(a.stdout, public)
	return err
}

// keygenPublic prints the public keys of the identities in a file.
func (a *app) keygenPublic(path string) error {
	ids, err := envelope.ReadIdentityFile(path)
	if err != nil {
		return usageErrorf("-y %s: %v", path, err)
	}
	var out []string
	for _, id := range ids {
		switch v := id.(type) {
		case *age.X25519Identity:
			out = append(out, v.Recipient().String())
		case *age.HybridIdentity:
			out = append(out, v.Recipient().String())
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("-y %s: no age identity in it (SSH keys: use ssh-keygen -y)", path)
	}
	_, err = fmt.Fprintln(a.stdout, strings.Join(out, "\n"))
	return err
}

package fs

import (
	"errors"
	"fmt"
	"os"
)

// linkRename renames without replacing by linking the new name (which fails
// when it exists) and removing the old one: renameNoReplace on systems
// without an atomic rename that refuses to replace (rename_other.go), and on
// Linux filesystems without RENAME_NOREPLACE. A crash in between leaves both
// names on one file; Recover and listing see the final name only once.
//
// It is idempotent: when newpath exists and is oldpath's file (same device
// and inode: an earlier call linked it and then failed to remove oldpath),
// it removes oldpath and succeeds, where a retry would otherwise fail with
// "file exists" for ever. Any other file at newpath is an error wrapping
// os.ErrExist.
func linkRename(oldpath, newpath string) error {
	err := os.Link(oldpath, newpath)
	if errors.Is(err, os.ErrExist) && sameFiles(oldpath, newpath) {
		err = nil // linked by an earlier attempt
	}
	if err != nil {
		return err
	}
	if err := os.Remove(oldpath); err != nil {
		return fmt.Errorf("dlqdump: fs: rename %s to %s: linked, removing the old name failed (a retry finishes it): %w", oldpath, newpath, err)
	}
	return nil
}

// sameFiles reports whether two paths name one file.
func sameFiles(a, b string) bool {
	sa, err := os.Lstat(a)
	if err != nil {
		return false
	}
	sb, err := os.Lstat(b)
	return err == nil && os.SameFile(sa, sb)
}

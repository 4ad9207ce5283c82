//go:build !linux

package fs

// renameNoReplace renames oldpath to newpath, failing with an error wrapping
// os.ErrExist when newpath exists instead of replacing it. Without an atomic
// rename that refuses to replace, it links and removes (linkRename), which a
// retry after a failed remove finishes.
func renameNoReplace(oldpath, newpath string) error { return linkRename(oldpath, newpath) }

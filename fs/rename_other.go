//go:build !linux

package fs

// renameNoReplace renames oldpath to newpath, failing with an error wrapping
// os.ErrExist when newpath exists instead of replacing it.
func renameNoReplace(oldpath, newpath string) error { return linkRename(oldpath, newpath) }

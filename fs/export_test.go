package fs

// SetTestHookLocked sets a function run when a record write holds its lock
// (nil: none).
func SetTestHookLocked(f func()) { testHookLocked = f }

// SetTestHookCreate sets a function run when a record write that found no
// record is about to create its first file (lost false), and when it found
// one there then (lost true); nil: none.
func SetTestHookCreate(f func(lost bool)) { testHookCreate = f }

package fs

// SetTestHookLocked sets a function run when a record write holds its lock
// (nil: none).
func SetTestHookLocked(f func()) { testHookLocked = f }

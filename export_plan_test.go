package dlqdump

// OnPlanWait makes f called whenever a Restorer waits for another's read of
// a segment to plan it (restore_plancache.go), until undo is called.
func OnPlanWait(f func()) (undo func()) {
	planWaiting.Store(&f)
	return func() { planWaiting.Store(nil) }
}

package changelog

// SetPageEntries makes pages hold at most n entries until the returned
// function is called.
func SetPageEntries(n int) (restore func()) {
	old := pageEntries
	pageEntries = n
	return func() { pageEntries = old }
}

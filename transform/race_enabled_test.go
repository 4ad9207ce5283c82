//go:build race

package transform

// raceEnabled: the race detector is on (sync.Pool drops what it is given
// at random then, so a pooled buffer may be allocated again).
const raceEnabled = true

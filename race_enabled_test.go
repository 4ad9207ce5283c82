//go:build race

package dlqdump

// raceEnabled: the race detector is on (its sync.Pool drops items at random).
const raceEnabled = true

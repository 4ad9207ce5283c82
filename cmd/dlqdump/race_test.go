//go:build race

package main

// raceEnabled builds the binary under test with the race detector too.
const raceEnabled = true

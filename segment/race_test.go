//go:build race

package segment

// raceEnabled scales down the tests that read hundreds of MiB of records.
const raceEnabled = true

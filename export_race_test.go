package dlqdump

// RaceEnabled tells the external tests (package dlqdump_test) whether the
// race detector is on.
const RaceEnabled = raceEnabled

package dlqdump_test

import (
	"os"
	"testing"
)

// children are programs the tests run as separate processes (to SIGKILL
// them), selected by the DLQDUMP_TEST_CHILD environment variable.
var children = map[string]func() int{}

func TestMain(m *testing.M) {
	if name := os.Getenv("DLQDUMP_TEST_CHILD"); name != "" {
		child, ok := children[name]
		if !ok {
			os.Stderr.WriteString("unknown test child " + name + "\n")
			os.Exit(2)
		}
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// Package browsertest finds the chromium the browser tests drive (the
// demo's dashboard, the console), installed by scripts/chromium.sh.
package browsertest

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of Debian's chromium, or DEMO_CHROMIUM when it
// is set, and fails the test saying how to install it when it is missing.
func Chromium(t testing.TB) string {
	t.Helper()
	p := os.Getenv("DEMO_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("chromium not found at %s (%v): run scripts/chromium.sh to install it (apt-get install -y --no-install-recommends chromium), or set DEMO_CHROMIUM", p, err)
	}
	return p
}

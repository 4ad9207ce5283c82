#!/usr/bin/env bash
# Installs Debian's chromium for the demo's dashboard test (demo/browser_test.go)
# when it is missing; does nothing else otherwise. Run it before
# `go test ./demo/` on a fresh machine or CI runner: ./scripts/chromium.sh
#
# The test drives chromium through the DevTools protocol (chromedp), so no
# chromium-driver is needed, and no recommended package either:
#   apt-get install -y --no-install-recommends chromium
# apt's output goes to a temporary file and is printed only if apt fails.
# DEMO_CHROMIUM names another binary to use instead (the test reads it too).
set -euo pipefail

chromium=${DEMO_CHROMIUM:-/usr/bin/chromium}
if [ -x "$chromium" ]; then
	echo "chromium: $("$chromium" --version 2>/dev/null || echo present) ($chromium)"
	exit 0
fi
if [ -n "${DEMO_CHROMIUM:-}" ]; then
	echo "chromium.sh: DEMO_CHROMIUM=$DEMO_CHROMIUM is not an executable file" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium.sh: $chromium is missing and this system has no apt-get: install chromium and set DEMO_CHROMIUM to its path" >&2
	exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "chromium.sh: $chromium is missing; installing it needs root, and sudo is not available" >&2
		exit 1
	fi
	sudo=(sudo)
fi

log=$(mktemp "${TMPDIR:-/tmp}/chromium-apt.XXXXXX")
trap 'rm -f "$log"' EXIT

# apt runs one apt-get command with its output in $log; if it fails, the
# output is printed and the script stops.
apt() {
	echo "+ apt-get $*" >>"$log"
	if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$log" 2>&1 </dev/null; then
		echo "chromium.sh: apt-get $* failed; apt's output:" >&2
		cat "$log" >&2
		exit 1
	fi
}

echo "chromium: installing Debian's chromium (apt-get install -y --no-install-recommends chromium)"
apt update
apt install -y --no-install-recommends chromium
if [ ! -x "$chromium" ]; then
	echo "chromium.sh: apt-get installed chromium but $chromium is missing; apt's output:" >&2
	cat "$log" >&2
	exit 1
fi
echo "chromium: $("$chromium" --version 2>/dev/null || echo installed) ($chromium)"

#!/usr/bin/env bash
# Installs Debian's chromium for the demo's dashboard test (demo/browser_test.go),
# only when /usr/bin/chromium is missing. Run it before `go test ./demo/`
# on a fresh machine or CI runner: ./scripts/chromium.sh
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
	echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y chromium
/usr/bin/chromium --version

#!/usr/bin/env bash
# Installs promtool (Debian's prometheus package) when it is missing, and with
# "check" checks and unit-tests dlqdump's alerting rules:
#
#   ./scripts/promtool.sh          # install promtool if missing
#   ./scripts/promtool.sh check    # promtool check rules + promtool test rules
#
# apt's output goes to a temporary file and is printed only if apt fails;
# the prometheus service the package brings is not started (policy-rc.d).
# PROMTOOL names another binary to use instead.
set -euo pipefail
cd "$(dirname "$0")/.."

promtool=${PROMTOOL:-$(command -v promtool || echo /usr/bin/promtool)}
if [ ! -x "$promtool" ]; then
	if [ -n "${PROMTOOL:-}" ]; then
		echo "promtool.sh: PROMTOOL=$PROMTOOL is not an executable file" >&2
		exit 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "promtool.sh: promtool is missing and this system has no apt-get: install Prometheus's promtool and set PROMTOOL to its path" >&2
		exit 1
	fi
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "promtool.sh: promtool is missing; installing it needs root, and sudo is not available" >&2
			exit 1
		fi
		sudo=(sudo)
	fi
	log=$(mktemp "${TMPDIR:-/tmp}/promtool-apt.XXXXXX")
	policy=""
	cleanup() {
		rm -f "$log"
		if [ -n "$policy" ]; then "${sudo[@]}" rm -f /usr/sbin/policy-rc.d; fi
	}
	trap cleanup EXIT
	# No service is started by the package's scripts while it installs.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
		"${sudo[@]}" chmod +x /usr/sbin/policy-rc.d
		policy=1
	fi
	apt() {
		echo "+ apt-get $*" >>"$log"
		if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$log" 2>&1 </dev/null; then
			echo "promtool.sh: apt-get $* failed; apt's output:" >&2
			cat "$log" >&2
			exit 1
		fi
	}
	echo "promtool: installing Debian's prometheus (apt-get install -y --no-install-recommends prometheus)"
	apt update
	apt install -y --no-install-recommends prometheus
	promtool=/usr/bin/promtool
	if [ ! -x "$promtool" ]; then
		echo "promtool.sh: apt-get installed prometheus but $promtool is missing; apt's output:" >&2
		cat "$log" >&2
		exit 1
	fi
fi
echo "promtool: $("$promtool" --version 2>&1 | head -1) ($promtool)"

if [ "${1:-}" = check ]; then
	"$promtool" check rules monitoring/alerts.yml
	(cd monitoring && "$promtool" test rules alerts_test.yml)
fi

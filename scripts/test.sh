#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need
# when missing (versitygw; Debian's chromium through scripts/chromium.sh and
# promtool through scripts/promtool.sh, --no-install-recommends, apt's output
# shown only if apt fails), starts a
# local S3 server, runs vet, gofmt and every test with the race detector,
# tests the broker destinations (brokers/, a module of its own, against
# nats-server and kfake in process), checks and unit-tests the alerting
# rules with promtool and the dashboard's expressions (monitoring/, a module
# of its own), then the short reliability loop and the benchmark smoke run,
# and stops the server.
#
#   ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CI=${CI:-1}

# phase names a step and when it starts, in seconds since the start, and
# ends the step before it, printing how long that one took; the summary at
# the end (or at the failure) lists every step's time.
phases=() # "seconds|name" of each step ended
phase_name=
phase_start=0
phase_end() {
	if [ -n "$phase_name" ]; then
		local took=$((SECONDS - phase_start))
		echo "== $phase_name: ${took}s"
		phases+=("$took|$phase_name")
	fi
	phase_name=
}
phase() {
	phase_end
	phase_name=$*
	phase_start=$SECONDS
	echo "== $* (at ${SECONDS}s)"
}
# summary prints the table of the steps' times; with an argument, the step
# that failed.
summary() {
	local status=$1 failed=$phase_name
	phase_end
	echo
	printf '%8s  %s\n' seconds phase
	local p
	for p in "${phases[@]}"; do
		printf '%8s  %s\n' "${p%%|*}" "${p#*|}"
	done
	printf '%8s  %s\n' "$SECONDS" total
	if [ "$status" != 0 ] && [ -n "$failed" ]; then
		echo "== FAILED in: $failed (exit status $status)"
	fi
}

phase "tools"
./scripts/versitygw.sh install
./scripts/chromium.sh
./scripts/promtool.sh

phase "local S3 server"
# A server of this run's own: another test.sh running at the same time (a
# second clone, say) has its own state file, so neither stops the other's.
vgw_state=$(mktemp -d "${TMPDIR:-/tmp}/dlqdump-test.XXXXXX")
export DLQDUMP_VGW_STATE=$vgw_state/versitygw.state
on_exit() {
	local status=$?
	./scripts/versitygw.sh stop >/dev/null 2>&1 || true
	rm -rf "$vgw_state"
	summary "$status"
	if [ "$status" = 0 ]; then
		echo "== all passed in $((SECONDS / 60))m$((SECONDS % 60))s"
	fi
}
trap on_exit EXIT
eval "$(./scripts/versitygw.sh start)"

# go vet runs every analyzer on the packages and their tests, so the go test
# runs below skip the subset they would run again (-vet=off).
phase "go vet"
go vet ./...
(cd bench && go vet ./...)
(cd brokers && go vet ./...)

phase "gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then
	echo "gofmt would change: $bad"
	exit 1
fi

phase "go test -race"
go test -race -vet=off -count=1 -timeout 25m ./...

phase "destinations into brokers (brokers/: nats-server and kfake in process)"
(cd brokers && go test -race -vet=off -count=1 -timeout 15m ./...)

phase "alerting rules and dashboard (monitoring/)"
./scripts/promtool.sh check
(cd monitoring && go vet ./... && go test -race -vet=off -count=1 ./...)

phase "reliability (short)"
go run ./cmd/dlqdump-reliability -short

phase "benchmark smoke run"
(cd bench && go run . -smoke -out "$(mktemp -d)")
(cd bench && go run ./designs -n 20000 -rounds 1 >/dev/null && go run ./designs -restore -n 20000 -rounds 1 >/dev/null)
go run ./cmd/dlqdump-bench all -n 200000 -latency-duration 500ms
(cd brokers && go run ./cmd/dlqdump-bench-dests -n 2000 -rounds 1 >/dev/null)
phase_end

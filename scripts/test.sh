#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need
# when missing (versitygw; Debian's chromium through scripts/chromium.sh,
# --no-install-recommends, apt's output shown only if apt fails), starts a
# local S3 server, runs vet, gofmt and every test with the race detector,
# then the short reliability loop and the benchmark smoke run, and stops
# the server.
#
#   ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CI=${CI:-1}

echo "== tools"
./scripts/versitygw.sh install
./scripts/chromium.sh

echo "== local S3 server"
eval "$(./scripts/versitygw.sh start)"
trap './scripts/versitygw.sh stop >/dev/null 2>&1 || true' EXIT

echo "== go vet"
go vet ./...
(cd bench && go vet ./...)

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then
	echo "gofmt would change: $bad"
	exit 1
fi

echo "== go test -race"
go test -race -count=1 -timeout 25m ./...

echo "== reliability (short)"
go run ./cmd/dlqdump-reliability -short

echo "== benchmark smoke run"
(cd bench && go run . -smoke -out "$(mktemp -d)")
go run ./cmd/dlqdump-bench all -n 200000 -latency-duration 500ms

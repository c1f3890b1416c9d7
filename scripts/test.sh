#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine with Go installed:
# vet, the root module under the race detector with shuffled order, a short
# fuzzing run of each fuzz target, and the bench module's smoke tests.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== go test -race -shuffle=on ./..."
go test -race -shuffle=on -timeout 30m ./...
echo "== fuzz (short)"
go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 10s ./internal/record
go test -run '^$' -fuzz '^FuzzWindowArithmetic$' -fuzztime 10s .
go test -run '^$' -fuzz '^FuzzCompareRecs$' -fuzztime 10s .
go test -run '^$' -fuzz '^FuzzCheckPage$' -fuzztime 10s .
go test -run '^$' -fuzz '^FuzzClientIP$' -fuzztime 10s ./httplimit
go test -run '^$' -fuzz '^FuzzKeysUnambiguous$' -fuzztime 10s ./httplimit
if [ -f bench/go.mod ]; then
  echo "== bench module (smoke)"
  (cd bench && go vet ./... && go test -short -timeout 20m ./...)
fi
# --- redisstore (issue 10): real redis-server, standalone and Cluster ---
echo "== redisstore (real redis-server)"
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
fi
(cd redisstore && go vet ./...)
RATEDB_REQUIRE_REDIS=1 go test -race -shuffle=on -timeout 10m ./redisstore/...
go test -run '^$' -fuzz '^FuzzDecodeRead$' -fuzztime 10s ./redisstore
go test -run '^$' -fuzz '^FuzzDecodeCount$' -fuzztime 10s ./redisstore
# --- end redisstore ---
# --- service block (issue 12: cmd/ratedb and ratedbprom) ---
echo "== service: vet and go test -race -shuffle=on ./cmd/ratedb/... ./ratedbprom/..."
go vet ./cmd/ratedb/... ./ratedbprom/...
# The --redis end-to-end test needs redis-server (installed by the redisstore block above).
command -v redis-server >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; }
RATEDB_REQUIRE_REDIS=1 go test -race -shuffle=on -timeout 10m ./cmd/ratedb/... ./ratedbprom/...
echo "== service: fuzz (short)"
go test -run '^$' -fuzz '^FuzzDecodeCheck$' -fuzztime 10s ./cmd/ratedb/internal/httpapi
go test -run '^$' -fuzz '^FuzzDecodeCheckFast$' -fuzztime 10s ./cmd/ratedb/internal/httpapi
go test -run '^$' -fuzz '^FuzzDecodeRule$' -fuzztime 10s ./cmd/ratedb/internal/httpapi
go test -run '^$' -fuzz '^FuzzBuild$' -fuzztime 10s ./cmd/ratedb/internal/rules
go test -run '^$' -fuzz '^FuzzMatchPattern$' -fuzztime 10s ./cmd/ratedb/internal/rules
# --- end of service block ---
# --- envoy (issue 13): Envoy rate limit protocol in cmd/ratedb ---
echo "== envoy: fuzz (short); its tests run in the service block's go test ./cmd/ratedb/..."
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 10s ./cmd/ratedb/internal/envoyconf
go test -run '^$' -fuzz '^FuzzCheck$' -fuzztime 10s ./cmd/ratedb/internal/grpcapi
# --- end envoy ---

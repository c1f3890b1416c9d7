#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine with Go installed
# (about 12-15 minutes on 2 cores). It installs redis-server from Debian's
# packages when it is missing (the Redis tests start their own throwaway
# servers on loopback ports and stop them), then: gofmt, go vet of every
# module, go test -race -shuffle=on of the root module, redisstore,
# ratedbprom and cmd/ratedb (the service's end-to-end tests build and run
# the real binary), a short run of every fuzz target, and the bench module's
# smoke tests. Go downloads the modules of go.work on the first run.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== redis-server"
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
fi
redis-server --version
# The Redis tests fail, instead of skipping, when redis-server is missing.
export RATEDB_REQUIRE_REDIS=1

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi

modules=(./... ./redisstore/... ./ratedbprom/... ./cmd/ratedb/...)
echo "== go vet"
go vet "${modules[@]}"
(cd bench && go vet ./...)

echo "== go test -race -shuffle=on: root module (library, httplimit, harnesses)"
go test -race -shuffle=on -timeout 30m ./...
echo "== go test -race -shuffle=on: redisstore (standalone and Cluster redis-servers)"
go test -race -shuffle=on -timeout 15m ./redisstore/...
echo "== go test -race -shuffle=on: ratedbprom and cmd/ratedb (the built binary, HTTP and gRPC)"
go test -race -shuffle=on -timeout 15m ./ratedbprom/... ./cmd/ratedb/...

echo "== fuzz (short)"
fuzz() { go test -run '^$' -fuzz "^$1\$" -fuzztime "${FUZZTIME:-8s}" "$2"; }
fuzz FuzzDecode ./internal/record
fuzz FuzzWindowArithmetic .
fuzz FuzzCompareRecs .
fuzz FuzzCheckPage .
fuzz FuzzClientIP ./httplimit
fuzz FuzzKeysUnambiguous ./httplimit
fuzz FuzzDecodeRead ./redisstore
fuzz FuzzDecodeCount ./redisstore
fuzz FuzzDecodeCheck ./cmd/ratedb/internal/httpapi
fuzz FuzzDecodeCheckFast ./cmd/ratedb/internal/httpapi
fuzz FuzzDecodeRule ./cmd/ratedb/internal/httpapi
fuzz FuzzBuild ./cmd/ratedb/internal/rules
fuzz FuzzMatchPattern ./cmd/ratedb/internal/rules
fuzz FuzzParse ./cmd/ratedb/internal/envoyconf
fuzz FuzzCheck ./cmd/ratedb/internal/grpcapi

echo "== bench module (smoke)"
(cd bench && go test -short -timeout 20m ./...)
echo "== all tests passed"

#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine with Go installed
# (about 10 minutes on 2 cores with the module cache filled). It installs redis-server from Debian's
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
echo "== go test without -race: the cache's admission tests and the reporter's (the race detector empties the pools where ristretto and the reporter batch)"
go test -count 1 -run 'TestKeysUsedTwiceDoNotFlushTheCache|TestOneOffKeysDoNotFlushTheCache|TestNewWindowOfferedAtFirstUseOnlyWithRoom|TestReporter' .
echo "== go test -race -shuffle=on: redisstore (standalone and Cluster redis-servers)"
go test -race -shuffle=on -timeout 15m ./redisstore/...
echo "== go test -race -shuffle=on: ratedbprom and cmd/ratedb (the built binary, HTTP and gRPC)"
go test -race -shuffle=on -timeout 15m ./ratedbprom/... ./cmd/ratedb/...

echo "== fuzz (short)"
# Each target runs a fixed number of executions (a few seconds each here),
# not a duration: with a duration, Go 1.26's fuzz coordinator can report a
# spurious "context deadline exceeded" failure when the time runs out
# (go.dev/issue/75804, fixed in Go 1.27). FUZZTIME overrides every budget,
# e.g. FUZZTIME=10m for a long local run.
fuzz() { go test -run '^$' -fuzz "^$1\$" -fuzztime "${FUZZTIME:-$3}" "$2"; }
fuzz FuzzDecode ./internal/record 150000x
# packed file format (issue 11)
fuzz FuzzDecodeBlock ./internal/record 60000x
fuzz FuzzDecodeSealedBlock ./internal/record 60000x
fuzz FuzzCheckTree ./internal/layout 30000x
fuzz FuzzWindowArithmetic . 100000x
fuzz FuzzCheckPage . 8000x
fuzz FuzzMigrateRecord . 3000x
fuzz FuzzOpenFile . 1000x
fuzz FuzzClientIP ./httplimit 20000x
fuzz FuzzKeysUnambiguous ./httplimit 60000x
fuzz FuzzProxyAppendedAddressWins ./httplimit 20000x
fuzz FuzzDecodeRead ./redisstore 40000x
fuzz FuzzDecodeCount ./redisstore 40000x
fuzz FuzzDecodeRefund ./redisstore 20000x
fuzz FuzzWildcardMatch ./cmd/ratedb/internal/envoyconf 20000x
fuzz FuzzDecodeCheck ./cmd/ratedb/internal/httpapi 50000x
fuzz FuzzDecodeCheckFast ./cmd/ratedb/internal/httpapi 100000x
fuzz FuzzDecodeRule ./cmd/ratedb/internal/httpapi 40000x
fuzz FuzzServe ./cmd/ratedb/internal/httpapi 30000x
fuzz FuzzBuild ./cmd/ratedb/internal/rules 80000x
fuzz FuzzMatchPattern ./cmd/ratedb/internal/rules 100000x
fuzz FuzzParseFile ./cmd/ratedb/internal/rules 30000x
fuzz FuzzStoredRules ./cmd/ratedb/internal/rules 5000x
fuzz FuzzLoad ./cmd/ratedb/internal/keys 10000x
fuzz FuzzNewClient ./cmd/ratedb/internal/redisstate 10000x
fuzz FuzzParse ./cmd/ratedb/internal/envoyconf 10000x
fuzz FuzzParseKey ./cmd/ratedb/internal/tools 50000x
fuzz FuzzCheck ./cmd/ratedb/internal/grpcapi 30000x
fuzz FuzzLenientDecode ./cmd/ratedb/internal/grpcapi 20000x

echo "== bench module (smoke)"
(cd bench && go test -short -timeout 20m ./...)
echo "== all tests passed"

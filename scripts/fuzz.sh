#!/usr/bin/env bash
# Runs every Fuzz target for a bounded time each (default 10s): go test -fuzz
# accepts one target per run, so list them and run them one by one.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' "$dir"/*_test.go 2>/dev/null | awk '{print $2}' | sort -u); do
    echo "fuzz $pkg $f ($t)"
    # Keep the last progress line (it carries the execution count) and the verdict.
    out=$(go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" -fuzzminimizetime 2s "$pkg" 2>&1) || { echo "$out" | tail -30; exit 1; }
    echo "$out" | grep 'execs:' | tail -1 || true
    echo "$out" | tail -1
  done
done

#!/usr/bin/env bash
# Runs every Fuzz target for a bounded time each (default 10s): go test -fuzz
# accepts one target per run, so list them and run them one by one.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime expires while a worker is mid-call on a loaded
# machine (golang/go#75804, fixed in Go 1.27): no input is written and
# nothing is wrong with the target. Such a run is accepted only if it wrote
# no reproducer, printed no panic or test failure, and the deterministic
# replay of the corpus then passes. Anything else fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' "$dir"/*_test.go 2>/dev/null | awk '{print $2}' | sort -u); do
    echo "fuzz $pkg $f ($t)"
    if ! out=$(go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" -fuzzminimizetime 2s "$pkg" 2>&1); then
      if echo "$out" | grep -q 'context deadline exceeded' &&
        ! echo "$out" | grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:'; then
        echo "$out" | grep 'execs:' | tail -1 || true
        echo "fuzz: $f ended with Go's fuzztime shutdown race (golang/go#75804); replaying the corpus"
        go test -run "^${f}\$" "$pkg"
        continue
      fi
      echo "$out" | tail -30
      exit 1
    fi
    # Keep the last progress line (it carries the execution count) and the verdict.
    echo "$out" | grep 'execs:' | tail -1 || true
    echo "$out" | tail -1
  done
done

#!/usr/bin/env bash
# bounded.sh LIMIT LOG CMD...: runs CMD (a go test) with its output in LOG,
# streams its verdict lines (--- PASS/FAIL/SKIP of top-level tests, ok/FAIL
# of packages, panics) as they happen, and ends it after LIMIT seconds.
#
# CMD runs in a session of its own (setsid). The fault tests stop and kill
# processes; a stray signal to a process group (kill(2) with pid 0 stops
# the caller's whole group) then reaches only CMD's session, never this
# script, so the watchdog below still runs. At the limit it prints every
# process of the session with its state (T: stopped) and the end of LOG,
# kills the session and fails: a hang ends the run with a diagnosis instead
# of silence until an outer timeout.
set -uo pipefail
limit=$1 log=$2
shift 2
: >"$log"
setsid "$@" >"$log" 2>&1 </dev/null &
pid=$! # setsid execs CMD in place (this job is not a group leader): pid is the session id
tail -n +1 -f --pid="$pid" "$log" 2>/dev/null |
	grep --line-buffered -E '^(--- (PASS|FAIL|SKIP)|    --- FAIL|ok  |FAIL|panic:)' &
streamer=$!
start=$SECONDS
while kill -0 "$pid" 2>/dev/null; do
	if ((SECONDS - start >= limit)); then
		echo "bounded: '$*' still running after ${limit}s; the processes of its session (STAT T: stopped):"
		ps -o pid,ppid,pgid,stat,etime,args -s "$pid" || true
		echo "bounded: the last 100 lines of $log:"
		tail -n 100 "$log"
		kill -KILL -- -"$pid" 2>/dev/null # CMD's group (setsid made it the leader)
		pkill -KILL -s "$pid" || true     # and any group its tests made inside the session
		wait "$pid" 2>/dev/null
		exit 124
	fi
	sleep 1
done
wait "$pid"
rc=$?
wait "$streamer" 2>/dev/null
if ((rc != 0)); then
	echo "bounded: '$*' exited $rc; the end of its output (without === lines):"
	grep -v -E '^=== (RUN|PAUSE|CONT|NAME)' "$log" | tail -n 300
fi
exit "$rc"

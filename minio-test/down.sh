#!/usr/bin/env bash
# Stops the emulators up.sh started from $DSTL_EMULATORS_DIR, by the process ids
# it recorded (a process is stopped only if it is the one that was started:
# same id, same start time), waits for them to exit, and removes the state.
# Does nothing when nothing is running; safe to run twice.
#
# --keep-logs  leave $DSTL_EMULATORS_DIR/logs (to look at after a failure)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

keep_logs=
case ${1:-} in
--keep-logs) keep_logs=1 ;;
"") ;;
*) die "usage: down.sh [--keep-logs]" ;;
esac

state=$DSTL_EMULATORS_DIR
if [ ! -d "$state" ]; then
	say "nothing to stop ($state does not exist)"
	exit 0
fi

stop() { # NAME PID STARTED
	local name=$1 pid=$2 started=$3 _
	if ! alive "$pid" "$started"; then
		say "$name (pid $pid) is not running"
		return
	fi
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 100); do # 10s
		alive "$pid" "$started" || break
		sleep 0.1
	done
	if alive "$pid" "$started"; then
		say "$name (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null
		for _ in $(seq 50); do
			alive "$pid" "$started" || break
			sleep 0.1
		done
	fi
	if alive "$pid" "$started"; then
		say "error: $name (pid $pid) is still running"
		failed=1
		return
	fi
	say "stopped $name (pid $pid)"
}

failed=
for f in "$state"/pids/*; do
	[ -f "$f" ] || continue
	pid='' started=''
	{ read -r pid; read -r started; } <"$f"
	case $pid in
	'' | *[!0-9]*) say "ignoring $f: no process id in it" ;;
	*) stop "$(basename "$f")" "$pid" "$started" ;;
	esac
	[ -n "$failed" ] || rm -f "$f"
done
[ -z "$failed" ] || exit 1

rm -rf "$state/env" "$state/env.tmp" "$state/pids" "$state/data"
if [ -n "$keep_logs" ] && [ -d "$state/logs" ]; then
	say "logs kept in $state/logs"
else
	rm -rf "$state/logs"
	rmdir "$state" 2>/dev/null || true
fi

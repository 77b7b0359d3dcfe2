#!/usr/bin/env bash
# with-emulators.sh CMD [ARG...]: starts the emulators (up.sh), runs CMD with
# their settings in its environment, and stops them (down.sh) whatever CMD does,
# also on Ctrl-C. Exits with CMD's status (1 if the emulators did not start).
#
# Unless DSTL_EMULATORS_DIR is set, each run gets a fresh state folder of its
# own, so that runs in several checkouts at once neither collide nor stop each
# other's emulators. When CMD fails, the emulators' logs are kept and named.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || {
	echo "usage: with-emulators.sh CMD [ARG...]" >&2
	exit 2
}

if [ -z "${DSTL_EMULATORS_DIR:-}" ]; then
	DSTL_EMULATORS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dstl-emulators.XXXXXX") || exit 1
fi
export DSTL_EMULATORS_DIR

status=1
# shellcheck disable=SC2317 # called by the EXIT trap
finish() {
	trap '' INT TERM
	if [ "$status" -eq 0 ]; then
		bash "$here/down.sh"
	else
		bash "$here/down.sh" --keep-logs
	fi
}
trap finish EXIT
trap 'status=130; exit 130' INT
trap 'status=143; exit 143' TERM

if ! bash "$here/up.sh"; then
	echo "emulators: they did not start (see above); 'make test-unit' runs the tests without them" >&2
	exit 1
fi
# shellcheck source=/dev/null
. "$DSTL_EMULATORS_DIR/env"

"$@"
status=$?
exit "$status"

#!/usr/bin/env bash
# bench/state.sh: the disk-backed state stores (statestore Config.Dir) at
# sizes no test reaches, measured by statestore/internal/statebench:
#   - a 2 GiB state written, checkpointed, restored and checked with
#     GOMEMLIMIT=512MiB, with the peak resident set and Go heap of each phase;
#   - bytes uploaded ÷ bytes changed per materialisation, at 1 % and 10 %
#     churn, of 256 MiB (beside the stores in memory) and 2 GiB states;
#   - restore throughput from MinIO of 256 MiB and 1 GiB states beside raw
#     parallel GETs of the same objects, and a restore from local copies
#     with its GETs counted.
# Writes the tables to bench/statestore-disk.txt (STATE_BENCH_OUT), headed by
# the machine and each run's command. Run it with the emulators' settings in
# the environment: "make bench-state" runs it under minio-test/with-emulators.sh.
# It takes about ten minutes and needs about 12 GB of free disk in TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
: "${DSTL_S3_ENDPOINT:?no emulator settings: run 'make bench-state', or this under minio-test/with-emulators.sh}"
out=${STATE_BENCH_OUT:-bench/statestore-disk.txt}

work=$(mktemp -d "${TMPDIR:-/tmp}/dstl-state-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$GO" build -o "$work/statebench" ./statestore/internal/statebench

export AWS_ACCESS_KEY_ID="$DSTL_S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$DSTL_S3_SECRET_KEY" AWS_EC2_METADATA_DISABLED=true
# shellcheck disable=SC2016 # printed as it is, expanded by eval
minio='s3://$DSTL_S3_BUCKET/statebench?endpoint=$DSTL_S3_ENDPOINT&region=$DSTL_S3_REGION&use_path_style=true'

run() { # TITLE COMMAND (run by eval, printed as it is)
	local title=$1 cmd=$2
	echo "== $title" >&2
	{
		echo "## $title"
		echo
		echo "\$ $cmd"
		echo
		(cd "$work" && eval "$cmd")
		echo
	} >>"$out.tmp"
}

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -1)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null || true)
{
	echo "# Disk-backed state stores, $(date -u +%FT%TZ)"
	echo
	echo "Made by 'make bench-state' (bench/state.sh): each section is one run of"
	echo "statestore/internal/statebench (go run ./statestore/internal/statebench -h),"
	echo "built from this commit, the command as run from a temporary directory"
	echo "(DSTL_S3_*: the settings of MinIO on 127.0.0.1, from minio-test/up.sh)."
	echo "Machine: ${cpu:-unknown CPU}, $(getconf _NPROCESSORS_ONLN) cores, ${mem:-unknown} memory;"
	echo "$("$GO" version); $(uname -sr)."
	echo
} >"$out.tmp"

run "State larger than memory: 2 GiB under GOMEMLIMIT=512MiB, local backend" \
	'GOMEMLIMIT=512MiB ./statebench -mode large -mib 2048'
run "Upload ÷ changed, 256 MiB state, disk-backed and in memory, local backend" \
	'./statebench -mode churn -mib 256 -memory'
run "Upload ÷ changed, 2 GiB state, disk-backed, local backend" \
	'./statebench -mode churn -mib 2048'
run "Restore from MinIO, 256 MiB state" \
	"./statebench -mode restore -mib 256 -rounds 9 -base-path \"$minio\""
run "Restore from MinIO, 1 GiB state" \
	"./statebench -mode restore -mib 1024 -rounds 7 -base-path \"$minio\""

mv "$out.tmp" "$out"
echo "wrote $out" >&2

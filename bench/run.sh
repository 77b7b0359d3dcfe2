#!/usr/bin/env bash
# bench/run.sh: runs "dstl bench" on local disk, MinIO (with upload bodies
# signed, as by default, and unsigned), fake-gcs-server, Azurite and
# gocloud's mem://, one after another, and writes the tables to
# bench/results/DATE-MACHINE.txt and the JSON reports to
# bench/results/DATE-MACHINE.json, each headed by the machine's description,
# then draws the JSON's charts (the tool bench/report, a Go module of its
# own) into bench/results/DATE-MACHINE/ (an SVG per section and index.html).
# Run it with the emulators' settings in the environment: "make bench" runs
# it under minio-test/with-emulators.sh. Every run writes objects of format
# version 2 (--option format.version=2), the version the upload target is
# set for: its Put starts while the object is encoded (docs/FORMAT.md).
# Extra arguments go to every "dstl bench" after it (e.g. --rounds 5, or
# --option format.version=1 to measure version 1).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
: "${DSTL_S3_ENDPOINT:?no emulator settings: run 'make bench', or this under minio-test/with-emulators.sh}"

work=$(mktemp -d "${TMPDIR:-/tmp}/dstl-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$GO" build -o "$work/dstl" ./cmd/dstl
(cd bench/report && "$GO" build -o "$work/report" .)

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -1)
slug=$(printf '%s-%sc' "${cpu:-unknown-cpu}" "$(getconf _NPROCESSORS_ONLN)" |
	tr '[:upper:]' '[:lower:]' | sed 's/([^)]*)//g; s/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
mkdir -p bench/results
out="$(pwd)/bench/results/$(date -u +%F)-$slug"
# A second run on the same day and machine gets a number of its own.
if [ -e "$out.txt" ]; then
	n=2
	while [ -e "$out-$n.txt" ]; do n=$((n + 1)); done
	out="$out-$n"
fi

run() { # NAME BASE-PATH [ENV=VALUE...]
	local name=$1 base=$2
	shift 2
	echo "== $name" >&2
	{
		echo "## $name"
		echo
		# From the work folder, so that the local base path is a relative one.
		(cd "$work" && env "$@" ./dstl bench --base-path "$base" --save "$name.json" "${BENCH_ARGS[@]}")
		echo
	} >>"$out.txt"
}
BENCH_ARGS=(--option format.version=2 "$@")

{
	echo "# dstl bench, $(date -u +%FT%TZ)"
	echo
	echo "Made by 'make bench' (bench/run.sh): one 'dstl bench' per backend, the"
	echo "emulators on 127.0.0.1. The machine is in each report's first lines."
	echo
} >"$out.txt"
run local local
run minio "s3://$DSTL_S3_BUCKET/bench?endpoint=$DSTL_S3_ENDPOINT&region=$DSTL_S3_REGION&use_path_style=true" \
	AWS_ACCESS_KEY_ID="$DSTL_S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$DSTL_S3_SECRET_KEY"
# The same MinIO, with upload bodies unsigned over plain HTTP (no SHA-256 of
# each body, on either side: docs/STORES.md).
run minio-unsigned-payload "s3://$DSTL_S3_BUCKET/bench?endpoint=$DSTL_S3_ENDPOINT&region=$DSTL_S3_REGION&use_path_style=true&unsigned_payload=true" \
	AWS_ACCESS_KEY_ID="$DSTL_S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$DSTL_S3_SECRET_KEY"
run fake-gcs-server "gs://$DSTL_GCS_BUCKET/bench?endpoint=$DSTL_GCS_ENDPOINT"
run azurite "azblob://$DSTL_AZURE_CONTAINER/bench?endpoint=$DSTL_AZURE_ENDPOINT&account=$DSTL_AZURE_ACCOUNT" \
	AZURE_STORAGE_KEY="$DSTL_AZURE_KEY"
run gocloud-mem "mem://bench/run"

{
	echo "{"
	first=1
	for name in local minio minio-unsigned-payload fake-gcs-server azurite gocloud-mem; do
		[ "$first" = 1 ] || echo ","
		first=0
		printf '"%s": ' "$name"
		cat "$work/$name.json"
	done
	echo "}"
} >"$out.json"
"$work/report" --in "$out.json" --out "$out" >/dev/null
echo "wrote $out.txt, $out.json and the charts in $out/index.html" >&2

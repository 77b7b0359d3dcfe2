#!/usr/bin/env bash
# Starts MinIO, fake-gcs-server and Azurite on 127.0.0.1, each on a free port,
# waits until each answers its health check, creates the bucket (container)
# dstl-test in each, and writes the settings the tests read to
# $DSTL_EMULATORS_DIR/env as `export NAME=value` lines. Installs the emulators
# first if the tools cache lacks them. Stop them with down.sh.
#
# DSTL_EMULATORS_DIR  state folder (default ${TMPDIR:-/tmp}/dstl-emulators-$(id -u))
# DSTL_TOOLS          tools cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/dstl-tools)
# DSTL_EMULATOR_TIMEOUT  seconds to wait for each health check (default 60)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

timeout=${DSTL_EMULATOR_TIMEOUT:-60}
state=$DSTL_EMULATORS_DIR

need curl "curl is needed for the emulators' health checks and setup"
need openssl "openssl is needed to sign the request that creates the Azurite container"
need ps "ps is needed to record which processes were started (down.sh stops only those)"
curl --help all 2>/dev/null | grep -q -- --aws-sigv4 ||
	die "curl $(curl --version | sed -n '1s/^curl \([^ ]*\).*/\1/p') lacks --aws-sigv4 (curl 7.75 or later is needed to create the MinIO bucket)"

bash "$here/install.sh"

# The state folder: ours alone, and not in use by a running set.
if [ -e "$state" ] && [ ! -O "$state" ]; then
	die "$state belongs to another user; set DSTL_EMULATORS_DIR"
fi
for f in "$state"/pids/*; do
	[ -f "$f" ] || continue
	{ read -r pid && read -r started; } <"$f" || continue
	if alive "$pid" "$started"; then
		die "emulators already running from $state (pid $pid); stop them with minio-test/down.sh (make emulators-down)"
	fi
done
rm -rf "$state/pids" "$state/data" "$state/logs" "$state/env"
mkdir -p "$state/pids" "$state/data" "$state/logs"
chmod 700 "$state"

# Until the end, a failure stops what was started.
ok=
trap '[ -n "$ok" ] || DSTL_EMULATORS_DIR=$state bash "$here/down.sh" --keep-logs >&2' EXIT

curl_local=(curl -sS --noproxy '*' --connect-timeout 2 --max-time 10)

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
		return
	fi
	local port _
	for _ in $(seq 100); do
		port=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	die "found no free port on 127.0.0.1"
}

# start NAME CMD...: run CMD in the background, its output in logs/NAME.log,
# its pid and start time in pids/NAME; sets $pid.
start() {
	local name=$1
	shift
	# In the data folder, so that nothing an emulator writes lands elsewhere.
	(cd "$state/data" && exec nohup "$@" </dev/null >"$state/logs/$name.log" 2>&1) &
	pid=$!
	printf '%s\n%s\n' "$pid" "$(ps -o lstart= -p "$pid" || true)" >"$state/pids/$name"
}

# ready NAME PID PROBE...: wait until PROBE succeeds; fail if PID exits (status 2)
# or the timeout passes (status 1), printing the end of NAME's log.
ready() {
	local name=$1 pid=$2
	shift 2
	local deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			say "$name exited before it was ready; end of $state/logs/$name.log:"
			tail -n 20 "$state/logs/$name.log" >&2
			return 2
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			say "$name did not answer its health check within ${timeout}s; end of $state/logs/$name.log:"
			tail -n 20 "$state/logs/$name.log" >&2
			return 1
		fi
		sleep 0.2
	done
}

# launch NAME: start_NAME on new ports until it is ready, three tries at most
# (a port picked as free can be taken before the emulator binds it).
launch() {
	local name=$1 try rc
	for try in 1 2 3; do
		rc=0
		"start_$name" || rc=$?
		[ "$rc" -eq 0 ] && return
		if [ "$rc" -ne 2 ] || [ "$try" -eq 3 ]; then
			die "$name did not start"
		fi
		say "starting $name again on another port"
	done
}

status_of() { "${curl_local[@]}" -o /dev/null -w '%{http_code}' "$@" || true; }

minio_user=dstl-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
minio_password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

start_minio() {
	minio_port=$(free_port)
	local console
	console=$(free_port)
	while [ "$console" = "$minio_port" ]; do console=$(free_port); done
	rm -rf "$state/data/minio"
	mkdir -p "$state/data/minio"
	MINIO_ROOT_USER=$minio_user MINIO_ROOT_PASSWORD=$minio_password MINIO_BROWSER=off \
		start minio "$MINIO_BIN" server "$state/data/minio" \
		--address "127.0.0.1:$minio_port" --console-address "127.0.0.1:$console"
	ready minio "$pid" "${curl_local[@]}" -f "http://127.0.0.1:$minio_port/minio/health/live"
}

start_gcs() {
	gcs_port=$(free_port)
	start fake-gcs-server "$FAKE_GCS_BIN" -scheme http -host 127.0.0.1 -port "$gcs_port" \
		-backend memory -public-host "127.0.0.1:$gcs_port" -external-url "http://127.0.0.1:$gcs_port"
	ready fake-gcs-server "$pid" "${curl_local[@]}" -f "http://127.0.0.1:$gcs_port/storage/v1/b"
}

start_azurite() {
	azurite_port=$(free_port)
	# In memory, unless DSTL_AZURITE_ON_DISK is set (make bench sets it):
	# Azurite frees a deleted blob's memory only at its garbage collection,
	# every 10 minutes, and refuses writes past half the machine's memory
	# (MemoryExtentStoreAtSizeLimit); a bench run writes more than that.
	local persistence=(--inMemoryPersistence)
	if [ -n "${DSTL_AZURITE_ON_DISK:-}" ]; then
		mkdir -p "$state/data/azurite"
		persistence=(--location "$state/data/azurite")
	fi
	start azurite "$AZURITE_BIN" --blobHost 127.0.0.1 --blobPort "$azurite_port" \
		"${persistence[@]}" --skipApiVersionCheck --disableProductStyleUrl --disableTelemetry --silent
	# Azurite has no health endpoint: ready when it answers HTTP at all.
	ready azurite "$pid" azurite_answers
}
azurite_answers() { [ "$(status_of "http://127.0.0.1:$azurite_port/$AZURE_ACCOUNT?comp=list")" != 000 ]; }

say "starting MinIO, fake-gcs-server and Azurite (state in $state)"
launch minio
launch gcs
launch azurite

# The bucket in MinIO (S3 signature v4; the credentials go through stdin, not argv).
code=$(printf 'user = "%s:%s"\n' "$minio_user" "$minio_password" |
	"${curl_local[@]}" -K - --aws-sigv4 "aws:amz:us-east-1:s3" -X PUT \
		-o "$state/logs/minio-create-bucket.out" -w '%{http_code}' \
		"http://127.0.0.1:$minio_port/$TEST_BUCKET") || true
[ "$code" = 200 ] || die "creating bucket $TEST_BUCKET in MinIO answered HTTP $code: $(cat "$state/logs/minio-create-bucket.out" 2>/dev/null)"

# The bucket in fake-gcs-server.
code=$("${curl_local[@]}" -X POST -H 'Content-Type: application/json' -d "{\"name\":\"$TEST_BUCKET\"}" \
	-o "$state/logs/gcs-create-bucket.out" -w '%{http_code}' \
	"http://127.0.0.1:$gcs_port/storage/v1/b") || true
[ "$code" = 200 ] || die "creating bucket $TEST_BUCKET in fake-gcs-server answered HTTP $code: $(cat "$state/logs/gcs-create-bucket.out" 2>/dev/null)"

# The container in Azurite: PUT ?restype=container, signed with SharedKey.
# String to sign: the verb, eleven standard headers (all empty here), the
# x-ms-* headers, then the resource: /account + the path (which, path-style,
# starts with the account again) and the query parameters as name:value lines.
azure_date=$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')
azure_version=2021-08-06
string_to_sign=$(printf 'PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:%s\n/%s/%s/%s\nrestype:container' \
	"$azure_date" "$azure_version" "$AZURE_ACCOUNT" "$AZURE_ACCOUNT" "$TEST_BUCKET")
azure_key_hex=$(printf '%s' "$AZURE_KEY" | openssl base64 -d -A | od -An -v -tx1 | tr -d ' \n')
signature=$(printf '%s' "$string_to_sign" |
	openssl dgst -sha256 -mac HMAC -macopt "hexkey:$azure_key_hex" -binary | openssl base64 -A)
code=$("${curl_local[@]}" -X PUT \
	-H "x-ms-date: $azure_date" -H "x-ms-version: $azure_version" \
	-H "Authorization: SharedKey $AZURE_ACCOUNT:$signature" \
	-o "$state/logs/azurite-create-container.out" -w '%{http_code}' \
	"http://127.0.0.1:$azurite_port/$AZURE_ACCOUNT/$TEST_BUCKET?restype=container") || true
[ "$code" = 201 ] || die "creating container $TEST_BUCKET in Azurite answered HTTP $code: $(cat "$state/logs/azurite-create-container.out" 2>/dev/null)"

# The settings, written whole or not at all.
cat >"$state/env.tmp" <<ENV
# dstl test emulators, started $(date '+%Y-%m-%d %H:%M:%S') by minio-test/up.sh; stop them with minio-test/down.sh.
export DSTL_S3_ENDPOINT=http://127.0.0.1:$minio_port
export DSTL_S3_REGION=us-east-1
export DSTL_S3_ACCESS_KEY=$minio_user
export DSTL_S3_SECRET_KEY=$minio_password
export DSTL_S3_BUCKET=$TEST_BUCKET
export DSTL_GCS_ENDPOINT=http://127.0.0.1:$gcs_port
export DSTL_GCS_BUCKET=$TEST_BUCKET
export DSTL_AZURE_ENDPOINT=http://127.0.0.1:$azurite_port/$AZURE_ACCOUNT
export DSTL_AZURE_ACCOUNT=$AZURE_ACCOUNT
export DSTL_AZURE_KEY=$AZURE_KEY
export DSTL_AZURE_CONTAINER=$TEST_BUCKET
ENV
mv "$state/env.tmp" "$state/env"
ok=1
say "MinIO on 127.0.0.1:$minio_port, fake-gcs-server on 127.0.0.1:$gcs_port, Azurite on 127.0.0.1:$azurite_port"
say "settings: . $state/env"

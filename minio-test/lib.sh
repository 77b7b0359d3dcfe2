# shellcheck shell=bash disable=SC2034
# Settings and helpers shared by the emulator scripts; sourced, not run.

# Pinned versions. Changing one makes install.sh build or fetch it again into a
# new folder of the tools cache; the old folder can be deleted by hand.
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
FAKE_GCS_MODULE=github.com/fsouza/fake-gcs-server
FAKE_GCS_VERSION=v1.56.1
AZURITE_VERSION=3.35.0

# Where the emulators are installed (kept between runs, outside the repository).
DSTL_TOOLS=${DSTL_TOOLS:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/dstl-tools}
# Where a running set keeps its env file, pid files, logs and data.
DSTL_EMULATORS_DIR=${DSTL_EMULATORS_DIR:-${TMPDIR:-/tmp}/dstl-emulators-$(id -u)}
DSTL_EMULATORS_DIR=${DSTL_EMULATORS_DIR%/}
GO=${GO:-go}

MINIO_BIN=$DSTL_TOOLS/minio-$MINIO_VERSION/bin/minio
FAKE_GCS_BIN=$DSTL_TOOLS/fake-gcs-server-$FAKE_GCS_VERSION/bin/fake-gcs-server
AZURITE_DIR=$DSTL_TOOLS/azurite-$AZURITE_VERSION
AZURITE_BIN=$AZURITE_DIR/node_modules/.bin/azurite-blob

# Azurite's documented development account and key (public, not a secret).
AZURE_ACCOUNT=devstoreaccount1
AZURE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

# The bucket (and Azure container) the tests use.
TEST_BUCKET=dstl-test

say() { printf 'emulators: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# need CMD WHY: fail with a clear message when CMD is not on PATH.
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH: $2"; }

# alive PID STARTED: PID is running (not a zombie) and is the process that was
# started at STARTED (as `ps -o lstart=` printed it), not a later one reusing the id.
alive() {
	local stat started
	stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	case $stat in Z*) return 1 ;; esac
	started=$(ps -o lstart= -p "$1" 2>/dev/null) || return 1
	[ "$started" = "$2" ]
}

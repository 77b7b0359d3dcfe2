#!/usr/bin/env bash
# Installs the pinned MinIO, fake-gcs-server and Azurite into the tools cache
# ($DSTL_TOOLS, default ${XDG_CACHE_HOME:-$HOME/.cache}/dstl-tools), one folder
# per version; what is already there is reused. Safe to run concurrently: a
# second run waits for the first and then reuses its result.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

mkdir -p "$DSTL_TOOLS" || die "cannot create the tools cache $DSTL_TOOLS"

# locked NAME CMD...: run CMD holding the tools cache's lock for NAME (if flock exists).
locked() {
	local name=$1
	shift
	if ! command -v flock >/dev/null 2>&1; then
		"$@"
		return
	fi
	(
		exec 9>"$DSTL_TOOLS/.$name.lock"
		if ! flock -n 9; then
			say "waiting for another install of $name to finish"
			flock 9
		fi
		"$@"
	)
}

# dir_mode: the mode a new folder gets under the current umask (mktemp -d makes 0700).
dir_mode() { printf '%o' $((0777 & ~$(umask))); }

# install_go NAME MODULE VERSION BINARY
install_go() {
	local name=$1 module=$2 version=$3 bin=$4
	if [ -x "$bin" ]; then
		say "reusing $name $version ($bin)"
		return
	fi
	need "$GO" "Go is needed to build $name (Go 1.26 or later: https://go.dev/dl/)"
	locked "$name" build_go "$@"
}

build_go() {
	local name=$1 module=$2 version=$3 bin=$4
	local dest tmp
	if [ -x "$bin" ]; then
		say "reusing $name $version (installed meanwhile)"
		return
	fi
	dest=$(dirname "$(dirname "$bin")")
	tmp=$(mktemp -d "$DSTL_TOOLS/.tmp-$name.XXXXXX")
	say "building $name $version into $dest (go install; MinIO takes several minutes)"
	# Build outside any module so that the repository's go.mod plays no part;
	# into a temporary folder renamed at the end, so a killed build leaves nothing.
	if ! (cd "$tmp" && GOBIN="$tmp/bin" CGO_ENABLED=0 "$GO" install "$module@$version"); then
		rm -rf "$tmp"
		die "go install $module@$version failed (see above)"
	fi
	chmod "$(dir_mode)" "$tmp"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	say "built $bin"
}

install_azurite() {
	if [ -x "$AZURITE_BIN" ]; then
		say "reusing azurite $AZURITE_VERSION ($AZURITE_DIR)"
		return
	fi
	need node "Node.js is needed to run Azurite (https://nodejs.org/)"
	need npm "npm is needed to install Azurite (it comes with Node.js)"
	locked azurite fetch_azurite
}

fetch_azurite() {
	local tmp
	if [ -x "$AZURITE_BIN" ]; then
		say "reusing azurite $AZURITE_VERSION (installed meanwhile)"
		return
	fi
	tmp=$(mktemp -d "$DSTL_TOOLS/.tmp-azurite.XXXXXX")
	say "installing azurite $AZURITE_VERSION into $AZURITE_DIR (npm install)"
	if ! npm install --prefix "$tmp" --no-save --no-audit --no-fund --loglevel=error \
		--fetch-timeout=60000 --fetch-retries=2 "azurite@$AZURITE_VERSION" >&2; then
		rm -rf "$tmp"
		die "npm install azurite@$AZURITE_VERSION failed (see above)"
	fi
	if [ ! -e "$tmp/node_modules/.bin/azurite-blob" ]; then
		rm -rf "$tmp"
		die "npm installed azurite@$AZURITE_VERSION but node_modules/.bin/azurite-blob is missing"
	fi
	chmod "$(dir_mode)" "$tmp"
	rm -rf "$AZURITE_DIR"
	mv "$tmp" "$AZURITE_DIR"
	say "installed $AZURITE_BIN"
}

# Every missing prerequisite at once, before anything is built.
missing=()
if [ ! -x "$FAKE_GCS_BIN" ] || [ ! -x "$MINIO_BIN" ]; then
	command -v "$GO" >/dev/null 2>&1 || missing+=("'$GO' (Go 1.26 or later, https://go.dev/dl/, to build MinIO and fake-gcs-server)")
fi
if [ ! -x "$AZURITE_BIN" ]; then
	command -v npm >/dev/null 2>&1 || missing+=("'npm' (comes with Node.js, https://nodejs.org/, to install Azurite)")
fi
command -v node >/dev/null 2>&1 || missing+=("'node' (Node.js, https://nodejs.org/, to run Azurite)")
if [ ${#missing[@]} -gt 0 ]; then
	say "error: not found on PATH:"
	printf '  %s\n' "${missing[@]}" >&2
	exit 1
fi

install_go fake-gcs-server "$FAKE_GCS_MODULE" "$FAKE_GCS_VERSION" "$FAKE_GCS_BIN"
install_azurite
install_go minio "$MINIO_MODULE" "$MINIO_VERSION" "$MINIO_BIN"

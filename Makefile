# dstl: build, test, benchmark and demo targets.
# `make demo` runs the main job on local disk; `make test` runs every test,
# with MinIO, fake-gcs-server and Azurite started on loopback (minio-test/).

GO        ?= go
PKGS      ?= ./...
BENCHTIME ?= 1s
BENCH_ARGS ?=
FUZZTIME  ?= 30s

.PHONY: all build demo example example-disk example-kafka test test-unit vet race fuzz bench bench-go bench-kv bench-restore bench-state sim clean \
	emulators-install emulators-up emulators-down chromium

all: build test

build:
	$(GO) build $(PKGS)

## demo: write, checkpoint, crash, recover and verify, on a temporary local directory
demo:
	$(GO) run ./cmd/dstl demo

## example: the word count service on state stores and the checkpoint
## catalog, on local disk: 3 instances killed (SIGKILL) and stopped
## (SIGSTOP) at random moments, restarted, rescaled 3 → 2 → 4, and checked
## against an independent count and the deletion rule; once with the state
## in memory, once on disk (as example-disk), about 30 s each (under
## `make test`, examples/wordcount's TestVerify runs both on MinIO)
example:
	$(GO) run ./examples/wordcount verify
	$(GO) run ./examples/wordcount verify -disk

## example-disk: the same with each instance's state on disk (a Pebble
## database of its own, incremental snapshots of SST files)
example-disk:
	$(GO) run ./examples/wordcount verify -disk

## example-kafka: the word count of a Kafka topic on kafkastate: a kfake
## cluster on loopback, 3 processes killed (SIGKILL) and stopped (SIGSTOP)
## at random moments, scaled out to 4 during a rebalance, every partition's
## checkpoint checked against an independent count of the input, and the
## output topic (in transactions) read with read_committed (about 40 s; `go run ./examples/kafkawordcount verify -brokers HOST:PORT` for a
## real broker)
example-kafka:
	$(GO) run ./examples/kafkawordcount verify

## test: go vet, then every test with the race detector, with the emulators
## started first and stopped afterwards (even when a test fails), and
## Chromium (installed first when missing and possible) named by
## DSTL_CHROMIUM for the charts' browser test, which skips without it; the
## exit status is the tests'
test: vet chromium
	DSTL_CHROMIUM="$$( [ -x "$(CHROMIUM)" ] && echo "$(CHROMIUM)" )" GO="$(GO)" bash minio-test/with-emulators.sh $(GO) test -race -count=1 -timeout 15m $(PKGS)

## chromium: install Debian's Chromium (apt-get, quietly) when $(CHROMIUM)
## is missing and this is a Debian machine where we are root; otherwise, or
## when the installation fails (no network), a warning: cmd/dstl's
## TestBrowserCharts drives it headless and skips, saying why, without it
CHROMIUM ?= /usr/bin/chromium
chromium:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "warning: $(CHROMIUM) is missing and cannot be installed here (apt-get as root): the browser test will skip"; exit 0; fi; \
	echo "installing chromium (apt-get) for the browser test"; \
	if ! { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; }; then \
		echo "warning: apt-get could not install chromium: the browser test will skip"; fi; \
	if [ ! -x "$(CHROMIUM)" ]; then echo "warning: $(CHROMIUM) is still missing: the browser test will skip"; fi

## test-unit: go vet and every test, without emulators (their tests skip)
test-unit: vet race

vet:
	$(GO) vet $(PKGS)
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

race:
	DSTL_CHROMIUM="$$( [ -x "$(CHROMIUM)" ] && echo "$(CHROMIUM)" )" $(GO) test -race -count=1 -timeout 15m $(PKGS)

## fuzz: run each decoder's fuzzer for FUZZTIME
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeObject$$' -fuzztime=$(FUZZTIME) ./dstl/format/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeFrame$$' -fuzztime=$(FUZZTIME) ./dstl/format/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeFrameV2$$' -fuzztime=$(FUZZTIME) ./dstl/format/
	$(GO) test -run='^$$' -fuzz='^FuzzHandleUnmarshalBinary$$' -fuzztime=$(FUZZTIME) ./dstl/
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./dstl/objname/
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZTIME) ./catalog/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeEntry$$' -fuzztime=$(FUZZTIME) ./statestore/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeSnapshotObject$$' -fuzztime=$(FUZZTIME) ./statestore/
	$(GO) test -run='^$$' -fuzz='^FuzzCheckpointHandle$$' -fuzztime=$(FUZZTIME) ./statestore/
	$(GO) test -run='^$$' -fuzz='^FuzzRestoreSnapshot$$' -fuzztime=$(FUZZTIME) ./statestore/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeManifest$$' -fuzztime=$(FUZZTIME) ./statestore/internal/diskstate/

## bench: `dstl bench` on local disk, MinIO (signed and unsigned upload
## bodies), fake-gcs-server, Azurite and
## mem://, with the emulators started first; tables and JSON into
## bench/results/DATE-MACHINE.{txt,json}, and an SVG chart of each section
## with an index.html into bench/results/DATE-MACHINE/ (`dstl bench
## report`); BENCH_ARGS go to every run
bench:
	DSTL_AZURITE_ON_DISK=1 GO="$(GO)" bash minio-test/with-emulators.sh bash bench/run.sh $(BENCH_ARGS)

## bench-go: the engine's and the backends' go benchmarks, with the emulators
## up, six runs each into bench.txt (compare runs with benchstat)
bench-go:
	GO="$(GO)" bash minio-test/with-emulators.sh \
		$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) -count=6 ./dstl/... ./backends/... | tee bench.txt

## bench-kv: a key-value store's put and get in memory, on disk and of
## Pebble itself, logging on and off (BenchmarkKVOps of statestore), six
## runs into bench/statestore-kv.txt, then benchstat's summary (BENCHSTAT)
## into bench/statestore-kv-benchstat.txt
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@latest
bench-kv:
	$(GO) test -run='^$$' -bench='^BenchmarkKVOps$$' -benchmem -benchtime=$(BENCHTIME) -count=6 ./statestore | tee bench/statestore-kv.txt
	$(BENCHSTAT) -col /store bench/statestore-kv.txt | tee bench/statestore-kv-benchstat.txt

## bench-restore: what a restore does with the changes of a log once read
## (decoding them, applying them to an in-memory key-value store;
## BenchmarkRestoreApply/store=kv of statestore), in MB/s of the changes'
## logged bytes, six runs of two replays each (about a minute) into
## bench/statestore-restore-kv.txt (bench/statestore-benchstat.txt compares
## a whole restore, reading included, before and after)
bench-restore:
	$(GO) test -run='^$$' -bench='^BenchmarkRestoreApply$$/^store=kv$$/' -benchmem -benchtime=2x -count=6 ./statestore | tee bench/statestore-restore-kv.txt

## bench-state: the disk-backed state stores at sizes no test reaches
## (bench/state.sh, statestore/internal/statebench): a 2 GiB state under
## GOMEMLIMIT=512MiB, bytes uploaded ÷ bytes changed at 1 % and 10 % churn,
## restore from MinIO beside raw GETs and from local copies, with the
## emulators started first; tables into bench/statestore-disk.txt (about
## ten minutes, 12 GB of disk)
bench-state:
	GO="$(GO)" bash minio-test/with-emulators.sh bash bench/state.sh

## emulators-install: build or fetch the pinned emulators into the tools cache
## (${DSTL_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/dstl-tools}); reuses what is there
emulators-install:
	GO="$(GO)" bash minio-test/install.sh

## emulators-up: start them and write their settings to $DSTL_EMULATORS_DIR/env
## (default ${TMPDIR:-/tmp}/dstl-emulators-$(id -u)); then `. that-file`
emulators-up:
	GO="$(GO)" bash minio-test/up.sh

## emulators-down: stop what emulators-up started
emulators-down:
	bash minio-test/down.sh

clean:
	rm -f bench.txt

## sim: the seeded simulations over a fault-injecting backend (package
## sim), of the engine (TestSimulation), of the checkpoint catalog
## (TestCatalogSimulation) and of the state stores' checkpointer
## (TestStateSimulation, about 5 schedules a second on 2 cores): SEEDS
## schedules each from seed START (a failing seed prints the command that
## replays it); SIM_RUN=TestStateSimulation runs one of them; SIM_ARGS go
## to go test (e.g. -race, or -sim.maxfail=100000 to run every seed past
## failures)
SEEDS ?= 10000
START ?= 1
SIM_RUN ?= TestSimulation|TestCatalogSimulation|TestStateSimulation
SIM_ARGS ?=
sim:
	$(GO) test -count=1 -timeout 0 -run '^($(SIM_RUN))$$' ./sim $(SIM_ARGS) -sim.seeds=$(SEEDS) -sim.start=$(START) -v

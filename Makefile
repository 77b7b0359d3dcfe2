# dstl: build, test, benchmark and demo targets.
# `make demo` runs the main job on local disk; `make test` runs every test,
# with MinIO, fake-gcs-server and Azurite started on loopback (minio-test/).

GO        ?= go
PKGS      ?= ./...
# TOOLS are the repository's tools in Go modules of their own, outside
# ./... (bench/report draws the bench charts with gonum/plot and tests them
# in Chromium, so that the dstl module requires neither): build, vet, test
# and race cover them too; TOOLS= leaves them out.
TOOLS     ?= bench/report
BENCHTIME ?= 1s
BENCH_ARGS ?=
FUZZTIME  ?= 30s

.PHONY: all build demo example example-disk example-counter example-kafka test test-unit vet race fuzz bench bench-report bench-go bench-kv bench-restore bench-state bench-catalog sim sim-job clean \
	emulators-install emulators-up emulators-down chromium

all: build test

build:
	$(GO) build $(PKGS)
	for m in $(TOOLS); do (cd $$m && $(GO) build -o /dev/null ./...) || exit 1; done

## demo: write, checkpoint, crash, recover and verify, on a temporary local directory
demo:
	$(GO) run ./cmd/dstl demo

## example: the word count service on package job (the job runner, state
## stores and the checkpoint catalog), on local disk: processes killed
## (SIGKILL) and stopped (SIGSTOP) at random moments, restarted, rescaled
## from 3 instances in 3 processes to 2 in 2 and to 4 in 2, and checked
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

## example-counter: the shortest service on package job, on local disk: 4
## instances in 2 processes killed (SIGKILL) and restarted, the latest
## complete checkpoint restored and checked against the input at every
## kill and at the end (about 15 s; under `make test`, examples/counter's
## TestVerify runs it on MinIO)
example-counter:
	$(GO) run ./examples/counter verify

## example-kafka: the word count of a Kafka topic on kafkastate: a kfake
## cluster on loopback, 3 processes killed (SIGKILL) and stopped (SIGSTOP)
## at random moments, scaled out to 4 during a rebalance, every partition's
## checkpoint checked against an independent count of the input, and the
## output topic (in transactions) read with read_committed (about 40 s; `go run ./examples/kafkawordcount verify -brokers HOST:PORT` for a
## real broker)
example-kafka:
	$(GO) run ./examples/kafkawordcount verify

## test: go vet, then every test with the race detector, with the emulators
## started first and stopped afterwards (even when a test fails), then the
## tests of the TOOLS' modules (bench/report's browser test among them),
## with Chromium (installed first when missing and possible) named by
## DSTL_CHROMIUM for the charts' browser test, which skips without it; the
## exit status is the tests' (the TOOLS' tests run even when the others
## fail)
test: vet chromium
	status=0; \
	GO="$(GO)" bash minio-test/with-emulators.sh $(GO) test -race -count=1 -timeout 15m $(PKGS) || status=$$?; \
	$(TEST_TOOLS) || status=1; \
	exit $$status

# CHROMIUM_IF_THERE is $(CHROMIUM) when it is an executable, otherwise
# empty (for DSTL_CHROMIUM).
CHROMIUM_IF_THERE = $$( [ -x "$(abspath $(CHROMIUM))" ] && echo "$(abspath $(CHROMIUM))" )

# TEST_TOOLS runs the tests of each of the TOOLS' modules with the race
# detector, Chromium named by DSTL_CHROMIUM when it is there; it fails
# when one of them fails.
TEST_TOOLS = ( failed=0; for m in $(TOOLS); do \
	(cd $$m && DSTL_CHROMIUM="$(CHROMIUM_IF_THERE)" $(GO) test -race -count=1 -timeout 15m ./...) || failed=1; \
	done; exit $$failed )

## chromium: install Debian's Chromium (apt-get, quietly) when $(CHROMIUM)
## is missing and this is a Debian machine where we are root; otherwise, or
## when the installation fails (no network), a warning: bench/report's
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

## test-unit: go vet and every test, the TOOLS' too, without emulators
## (their tests skip)
test-unit: vet race

vet:
	$(GO) vet $(PKGS)
	for m in $(TOOLS); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

race:
	status=0; \
	$(GO) test -race -count=1 -timeout 15m $(PKGS) || status=$$?; \
	$(TEST_TOOLS) || status=1; \
	exit $$status

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
## mem://, objects of format version 2, with the emulators started first; tables and JSON into
## bench/results/DATE-MACHINE.{txt,json}, and an SVG chart of each section
## with an index.html into bench/results/DATE-MACHINE/ (by the tool
## bench/report, as bench-report does); BENCH_ARGS go to every run
bench:
	DSTL_AZURITE_ON_DISK=1 GO="$(GO)" bash minio-test/with-emulators.sh bash bench/run.sh $(BENCH_ARGS)

## bench-report: draw the charts of a bench JSON report, REPORT (by
## default the last bench/results/*.json by name, the newest date), into
## CHARTS (by default REPORT's path without .json): an SVG per section and
## an index.html, with the tool bench/report (a Go module of its own, so
## that the dstl module requires no chart package); REPORT is one `dstl
## bench --save` file or make bench's object of them
LATEST_REPORT := $(shell ls bench/results/*.json 2>/dev/null | sed 's/\.json$$//' | sort -V | tail -n 1)
REPORT ?= $(if $(LATEST_REPORT),$(LATEST_REPORT).json)
CHARTS ?= $(basename $(REPORT))
bench-report:
	@if [ -z "$(REPORT)" ]; then echo "bench-report: no REPORT=FILE.json given and none in bench/results/"; exit 2; fi
	cd bench/report && $(GO) run . --in "$(abspath $(REPORT))" --out "$(abspath $(CHARTS))"

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

## bench-catalog: what a checkpoint costs the catalog at scale (catalog's
## TestScale and TestScaleRestartStorm with -scale.full): 16, 256 and 1,024
## processes and 1,024 instances in 8 processes over 200 checkpoints, the
## independent mode, and a restart storm, on a request-counting in-memory
## store (about a minute), into bench/catalog-scale.txt
bench-catalog:
	$(GO) test -run='^TestScale' -count=1 -v ./catalog -scale.full | tee bench/catalog-scale.txt

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

## sim-job: the seeded simulation of the job runner (package job,
## TestJobSimulation): processes of one job on job.Run over one in-memory
## store, each behind its own fault wrapper, crashed, stopped, stalled past
## the grace, restarted and rescaled, checked for exactly-once state, no
## rollback of a confirmed checkpoint, no deletion of what a retained or
## completing checkpoint names, Complete in order, no hang and no goroutine
## left: SEEDS schedules from seed START, 4 x GOMAXPROCS at once (about two
## minutes per thousand on 2 cores; a failing seed prints the command that
## replays it); SIM_JOB_ARGS go to go test (e.g. -race, or
## -job.sim.maxfail=100000 to run every seed past failures)
SIM_JOB_ARGS ?=
sim-job:
	$(GO) test -count=1 -timeout 0 -run '^TestJobSimulation$$' ./job $(SIM_JOB_ARGS) -job.sim.seeds=$(SEEDS) -job.sim.start=$(START) -v

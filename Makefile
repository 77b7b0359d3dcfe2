# dstl: build, test, benchmark and demo targets.
# `make demo` runs the main job on local disk; `make test` runs every test.

GO        ?= go
PKGS      ?= ./...
BENCHTIME ?= 1s
FUZZTIME  ?= 30s

.PHONY: all build demo test vet race fuzz bench clean

all: build test

build:
	$(GO) build $(PKGS)

## demo: write, checkpoint, crash, recover and verify, on a temporary local directory
demo:
	$(GO) run ./cmd/dstl demo

## test: go vet, then every test with the race detector
test: vet race

vet:
	$(GO) vet $(PKGS)
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

race:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## fuzz: run each decoder's fuzzer for FUZZTIME
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeObject$$' -fuzztime=$(FUZZTIME) ./dstl/format/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeFrame$$' -fuzztime=$(FUZZTIME) ./dstl/format/
	$(GO) test -run='^$$' -fuzz='^FuzzHandleUnmarshalBinary$$' -fuzztime=$(FUZZTIME) ./dstl/

## bench: the engine's benchmarks (compare runs with benchstat)
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) -count=6 ./dstl/... ./backends/... | tee bench.txt

clean:
	rm -f bench.txt

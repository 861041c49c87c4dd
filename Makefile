# zonewright — `make dev` starts the whole stack, `make test` runs every test.
GO      ?= go
BIN     := $(CURDIR)/bin
GOFILES := $(shell git ls-files '*.go' 2>/dev/null)
TEMPORAL_CLI_VERSION := v1.5.1

.PHONY: all build dev test lint cross tools clean bench fuzz fuzz-http chaos

all: build

# illumos-sim is static: it runs once per simulated command (every probe),
# and without the dynamic loader and libc it starts faster.
build:
	$(GO) build -o $(BIN)/zonewright ./cmd/zonewright
	$(GO) build -o $(BIN)/zwctl ./cmd/zwctl
	CGO_ENABLED=0 $(GO) build -o $(BIN)/illumos-sim ./cmd/illumos-sim

# The whole system on embedded defaults, in the foreground. Extra flags:
# make dev DEV_FLAGS="--listen 127.0.0.1:9090"
dev: build
	$(BIN)/zonewright dev $(DEV_FLAGS)

# Every test, plus the checks CI must not forgive. Every test binary is
# compiled first (run with true: nothing runs), so no compile competes with
# the tests for the cores. internal/e2e goes first:
# it is the longest package (9 to 14 minutes; it runs 6 tests at once, see
# its TestMain), so it starts at once and the others run beside it. Then
# each fuzz target for 3,000 inputs beyond its seeds.
test: lint cross
	$(GO) test -count=1 -exec=true ./... >/dev/null
	$(GO) test -count=1 -timeout 45m ./internal/e2e/ ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=3000x

# Every fuzz target (func Fuzz… in a _test.go; every test run tries their
# seeds) for FUZZTIME each; an input that fails is kept in the package's
# testdata/fuzz, which the tests then try too.
FUZZTIME ?= 30s
fuzz:
	@set -e; log=$$(mktemp); for pkg in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
		for fz in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$pkg/*_test.go | cut -d' ' -f2); do \
			echo "fuzz $$pkg $$fz ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$fz\$$" -fuzztime $(FUZZTIME) ./$$pkg/ >$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; \
		done; \
	done; rm -f $$log

lint:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# What runs under SMF is built for illumos and never links the Temporal server.
cross:
	GOOS=illumos GOARCH=amd64 $(GO) build -o /dev/null ./cmd/zonewright
	GOOS=illumos GOARCH=amd64 $(GO) build -o /dev/null ./cmd/zwctl
	@if GOOS=illumos GOARCH=amd64 $(GO) list -deps ./cmd/zonewright | grep -q '^go.temporal.io/server'; then \
		echo "the illumos build of zonewright imports go.temporal.io/server"; exit 1; fi
	@echo "illumos cross-build ok"

# The Temporal CLI, for signalling and inspecting workflows.
tools:
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

clean:
	rm -rf $(BIN)

# Hostile requests to every route of a dev stack started for the run (a
# program, loopback only): 0 answers of 500 or more, 0 hung, 0 panics.
# make fuzz-http FUZZ_HTTP_FLAGS="--requests 20000 --seed 7"
fuzz-http: build
	$(GO) run ./cmd/zwfuzz --bin $(BIN) $(FUZZ_HTTP_FLAGS)

# Pod lifecycle speed on a whole stack started for the run (a program, not a
# test): make bench BENCH_FLAGS="--burst 50"
bench: build
	$(GO) run ./cmd/zwbench --bin $(BIN) $(BENCH_FLAGS)

# Crashes during a churn, on a whole stack of separate processes started
# for the run (a program, not a test): every invariant at its target, or
# exit 1 with the seed to reproduce it.
# make chaos CHAOS_FLAGS="--seed 7 --duration 2m"
chaos: build
	$(GO) run ./cmd/zwchaos --bin $(BIN) $(CHAOS_FLAGS)

# kvwire: `make demo` shows the client on the embedded mock cluster,
# `make test` runs every test. See README.md.
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 60s
CHAOS_DURATION ?= 10m

.PHONY: build test bench fuzz chaos chaos-net lint demo integration memcached-up memcached-down clean

build:
	$(GO) build ./...
	$(GO) build -o bin/kvcli ./cmd/kvcli

test:
	scripts/test.sh

# Benchmarks: speed and memory targets are checked here, never in unit tests.
bench:
	scripts/bench.sh

# Runs every fuzz target for FUZZTIME each (make fuzz FUZZTIME=10m).
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

# The chaos test for CHAOS_DURATION (make test runs its short form).
chaos:
	$(GO) test ./chaos -run 'TestChaos$$' -v -count=1 -timeout 0 -chaos.duration=$(CHAOS_DURATION)

# Network faults on real sockets: the mock cluster and a workload in two
# network namespaces, packet loss, duplication and a partition with iptables
# (needs root; skips with a message otherwise). About a minute.
chaos-net:
	scripts/chaos-net.sh

lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

demo:
	$(GO) run ./cmd/kvcli demo

# Runs the integration tests against Couchbase Server in Docker.
integration:
	scripts/integration.sh

memcached-up:
	@scripts/memcached.sh up

memcached-down:
	@scripts/memcached.sh down

clean:
	rm -rf bin

# ambientmc: see README.md.
GO        ?= go
# Unit tests: everything but the two suite packages, which build real clusters (their options package is a unit
# test, and so are the suite's TestPlan tests, which a run selecting no planned test sets nothing up for).
# The slowest first (each over 10 s in .ci/run on 2 cores), so that the packages running at once
# (UNIT_P) end together instead of one long package running alone at the end.
UNIT_SLOW  = ./framework/provider/local ./framework/incluster ./framework/mesh/install ./framework/workload ./framework/provider/wrapped \
             ./scripts/render ./framework/env ./framework/mesh ./framework/provider/kind
UNIT_PKGS  = $(shell $(GO) list $(UNIT_SLOW) ./... | grep -v -e /suites/multicluster$$ -e /suites/cutshort$$ -e /suites/kindexit$$ -e /suites/quickstart$$)
SUITE      = ./suites/multicluster
REPORT_DIR ?= $(if $(ARTIFACTS),$(ARTIFACTS),$(CURDIR)/_output/report)
E2E_FLAGS ?= -clusters=10
# What the main command trims to stay within five minutes: the full churn sweep (options/churn.go)
# and the memory check over every remote cluster.
E2E_FULL   = -latency.duration=10s -churn.rates=2,5,20,50 -churn.duration=20s -churn.cases=local,one-remote,all-remote -churn.modes=replace,ready -checks.clusters=0

.PHONY: all bins engine engine-stop images test fuzz e2e ci ci-suite ci-kind lint bench bench-scale report compare clean repro

all: lint test

## bins: build kube-apiserver, etcd and pilot-discovery from pinned sources into the cache
bins:
	$(GO) run ./scripts/bins

# Four packages at a time on any host, not go test's one per core: the slow packages spend much of
# their time waiting on their API servers (docs/measurements.md#why-the-settings-are-what-they-are).
UNIT_P    ?= 4

# Test binaries without DWARF (-w): debuggers need it, stack traces and pprof do not, and linking
# a test binary takes about half the CPU without it. `make test TEST_LDFLAGS=` keeps it.
TEST_LDFLAGS ?= -ldflags=-w

## engine: a Docker engine for the kind provider: one that answers, else (Linux, root) the
## distribution's, started here with its log in the cache, with a runtime wrapper only where the
## host's capability bounding set lacks what privileged containers ask for
engine:
	$(GO) run ./scripts/engine

## engine-stop: stop the engine make engine started (nothing else)
engine-stop:
	$(GO) run ./scripts/engine -stop

## images: every image a kind run needs, from the pinned sources, nothing pulled; cached by content
images:
	$(GO) run ./scripts/images

# make test runs the suite's TestPlan tests too; make ci leaves them to ci-suite (PLAN_TESTS empty).
PLAN_TESTS ?= yes

## test: unit tests (no suites, but the suite's plan tests, which set nothing up; many start real
## local API servers, skipping without make bins)
test:
	$(GO) test -count=1 -p=$(UNIT_P) $(TEST_VET) $(TEST_LDFLAGS) $(UNIT_PKGS)
	$(if $(PLAN_TESTS),$(GO) test -count=1 $(TEST_VET) $(TEST_LDFLAGS) $(SUITE) -run '^TestPlan')

# One fuzz target after another (go test fuzzes one per run), FUZZTIME each, on one worker so
# that a 2-core host keeps a core. An input that widens coverage is minimized for at most
# FUZZ_MINIMIZE instead of go test's 60 s, which would take the whole of a short run. Counts of
# inputs, not durations: Go 1.26's fuzzing coordinator can fail a target with "context deadline
# exceeded" when -fuzztime's deadline passes while a busy host holds a worker mid-input
# (go.dev/issue/75804, fixed in Go 1.27; seen in .ci/run on 2026-12-07); a count has no deadline.
FUZZTIME ?= 30000x
FUZZ_MINIMIZE ?= 500x
FUZZ = $(GO) test -run='^$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZ_MINIMIZE) -parallel=1 $(TEST_VET) $(TEST_LDFLAGS)

## fuzz: fuzz the inputs for FUZZTIME (30000 inputs) each: topology files, gates files, report.json
fuzz:
	$(FUZZ) -fuzz='^FuzzParse$$' ./topology
	$(FUZZ) -fuzz='^FuzzParse$$' ./framework/ci/gates
	$(FUZZ) -fuzz='^FuzzDecode$$' ./framework/report

## e2e: the full suites at the default 10 clusters: every churn case and rate, the memory check on every cluster
e2e: bins
	$(GO) test -count=1 -v -timeout=120m $(SUITE) $(E2E_FULL) $(E2E_FLAGS) -report-dir=$(REPORT_DIR)

## ci: what .ci/run runs on a clean clone: lint, unit tests, a cold binary build, the fuzz targets
## briefly, the istiod reproducers (each must still fail on the pinned istiod), short suites, then every suite on three kind clusters, two of them sharing a network
ci: lint bins test fuzz repro ci-suite ci-kind
# make ci's lint has run the whole of go vet already: no go test runs its subset again. ci-suite
# runs the suite's TestPlan tests with the rest, so make test leaves them out.
ci: TEST_VET = -vet=off
ci: PLAN_TESTS =

# Every suite on 3 clusters at small scale, two of them sharing a network (every join criterion,
# the three latency paths), in a shuffled order (go test prints the seed), with short latency
# runs and every istiod check's controls (one that must fail, one that must pass; the must-pass of
# the memory check runs release-1.30's istiod, which scripts/bins -checks.controls builds first),
# judged by the project's own gates (gates/ci.yaml); report, junit.xml, profiles and metrics.csv in REPORT_DIR ($ARTIFACTS
# when a CI sets it). Then a run forced past a short -timeout, which must end cleanly, and the
# smallest suite on the experiment's library (suites/quickstart: a join and one latency path on 2 clusters).
CI_GATES ?= $(CURDIR)/gates/ci.yaml
ci-suite:
	$(GO) run ./scripts/bins -checks.controls
	$(GO) test -count=1 -v -timeout=30m $(TEST_VET) $(TEST_LDFLAGS) $(SUITE) -clusters=3 -networks=2 -shuffle=on -latency.duration=3s -churn.rates=5 -churn.duration=5s -checks.controls -gates=$(CI_GATES) -report-dir=$(REPORT_DIR)
	$(GO) test -count=1 $(TEST_VET) $(TEST_LDFLAGS) ./suites/cutshort
	$(GO) test -count=1 $(TEST_VET) $(TEST_LDFLAGS) ./suites/quickstart -latency.duration=3s -report-dir=$(REPORT_DIR)/quickstart

# Every suite on three kind clusters, two of them sharing a network (make images' node image, istiod,
# istio-cni and the emulated ztunnel and east-west gateway in each cluster, MetalLB, the VXLAN between
# the nodes of one network), with short latency and churn runs at a rate kind carries on 2 cores
# (no rate search: a correctness pass, its figures are not the ones docs/measurements.md quotes),
# then a check that nothing of the run is left in Docker; then suites/kindexit, which ends seven
# more runs on two kind clusters while they start (signals, go test's deadline) and checks the same.
# The two heap checks of TestIstiodProperties are the local pass's alone (KIND_SKIP): they read the
# live heap of an isolated pilot-discovery on this host, the same binary in both passes, through
# fixed windows that are a large share of the kind pass (docs/ci.md); every other check runs on kind.
KIND_GATES ?= $(CURDIR)/gates/ci-kind.yaml
KIND_SKIP ?= TestIstiodProperties/^(memory_comes_back|a_remote-secret_rotation_does_not_leak)$$
# The kernel settings kubelet in a node writes, and /lib/modules, compared before and after.
HOST_STATE = for s in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do echo "$$s=$$(cat /proc/sys/$$s)"; done; ls -d /lib/modules 2>/dev/null || echo "no /lib/modules"
ci-kind: engine images
	@mkdir -p _output; { $(HOST_STATE); } > _output/host-before.txt
	$(GO) test -count=1 -v -timeout=30m $(TEST_VET) $(TEST_LDFLAGS) $(SUITE) -provider=kind -clusters=3 -networks=2 -latency.duration=3s -latency.qps=20 -churn.rates=5 -churn.duration=5s -skip='$(KIND_SKIP)' -gates=$(KIND_GATES) -report-dir=$(REPORT_DIR)/kind
	@left="$$(docker ps -aq --filter label=io.x-k8s.kind.cluster)$$(docker network ls -q --filter name=ambientmc-)"; \
	  if [ -n "$$left" ]; then echo "ci-kind: the run left containers or networks behind:"; docker ps -a; docker network ls; exit 1; fi; \
	  echo "ci-kind: no kind container or ambientmc network left"
	@{ $(HOST_STATE); } > _output/host-after.txt; \
	  if ! diff _output/host-before.txt _output/host-after.txt; then echo "ci-kind: the run changed the host's kernel settings or /lib/modules"; exit 1; fi; \
	  echo "ci-kind: the host's kernel settings and /lib/modules are as before the run"
	$(GO) test -count=1 -v -timeout=15m $(TEST_VET) $(TEST_LDFLAGS) ./suites/kindexit

## repro: the reproducers of the istiod faults found here (repro/, a module of its own) against the
## pinned istiod: each must still fail there, or the fault was fixed and docs/findings.md is out of date
REPRO_COUNT = $(words $(filter-out README.md go.mod go.sum run.sh,$(notdir $(wildcard repro/*))))
repro:
	@mkdir -p _output; cd repro && ./run.sh > ../_output/repro.txt 2>&1; rc=$$?; grep '^== ' ../_output/repro.txt; \
	  got=$$(grep -c '^== .*: FAILS: reproduced' ../_output/repro.txt); \
	  if [ $$rc -ne 1 ] || [ "$$got" -ne $(REPRO_COUNT) ]; then echo "repro: $$got of $(REPRO_COUNT) reproducers still reproduce their fault (run.sh exit $$rc; output in _output/repro.txt)"; exit 1; fi; \
	  echo "repro: all $(REPRO_COUNT) reproducers fail on the pinned istiod, as docs/findings.md says"

## lint: formatting, a tidy go.mod, and vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	cd scripts/kubebin && $(GO) vet ./etcd

## bench: start time and RSS per cluster for 1, 5 and 10 local clusters (needs `make bins`)
bench: bins
	$(GO) test -run=NONE -bench=BenchmarkClusterStart -benchtime=1x -timeout=30m ./framework/provider/local

## bench-scale: for BENCH_CLUSTERS local clusters (default 1,10,25,50), one size after another: the
## join suite with only the observed istiod (setup time and memory per cluster, per-remote slopes,
## join cost and convergence against the clusters already joined) as benchstat lines and a table
## in _output/bench-scale; BENCH_FLAGS go to each run (e.g. -scale=medium). Not part of ci.
BENCH_CLUSTERS ?= 1,10,25,50
BENCH_FLAGS ?=
bench-scale: bins
	$(GO) run ./scripts/benchscale -clusters=$(BENCH_CLUSTERS) -out=$(CURDIR)/_output/bench-scale -timeout=60m -- $(BENCH_FLAGS)

## report: print the last report written by e2e or ci
report:
	@cat $(REPORT_DIR)/report.md

## compare: the same experiment against istiod A and B (versions or binaries), alternating for ROUNDS rounds;
## FAIL_ON (a PR-versus-base job: A the base, B the change) fails it when B regresses significantly beyond a
## bound: FAIL_ON='Join/perRemote:live-heap-B+10%,Join/growth:join-cpu-s-first+20%' or a gates file's
## baseline: section (FAIL_ON=gates/compare.yaml); it needs ROUNDS>=4 and writes junit.xml beside compare.md
ROUNDS ?= 3
SUITE_FLAGS ?= -clusters=3 -run 'TestControlPlaneJoin|TestControlPlaneLeave'
FAIL_ON ?=
compare:
	$(GO) run ./scripts/compare -a='$(A)' -b='$(B)' -rounds=$(ROUNDS) -fail-on='$(FAIL_ON)' -out=$(CURDIR)/_output/compare -- $(SUITE_FLAGS)

clean:
	rm -rf _output

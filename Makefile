# dgd-rollout: partitioned, revision-tracked rolling updates of DynamoGraphDeployments.
#
#   make test     every test: unit, property, fuzz seeds, envtest suites
#   make run      local API server + CRDs + operator + a sample DGD (or your KUBECONFIG)
#   make bench    benchmarks (not part of make test)
#   make fuzz     longer fuzz runs

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
BIN := $(CURDIR)/bin
export GOFLAGS := -buildvcs=false
CONTROLLER_TOOLS_VERSION := v0.20.0
CONTROLLER_GEN := $(BIN)/controller-gen
CRD := config/crd/bases/nvidia.com_dynamographdeployments.yaml
FUZZTIME ?= 2m
# Every fuzz target also runs briefly in make test (CI); make fuzz runs them for FUZZTIME.
# make test counts executions, not seconds: with a duration, Go's fuzz coordinator (go1.26)
# can fail a clean run with "context deadline exceeded" at the deadline (golang/go#75804,
# fixed in go1.27); a count never sets that deadline. A CI run failed so on FuzzCompute.
FUZZTIME_SHORT ?= 20000x
# Test packages run at once. go test's default is GOMAXPROCS (2 on CI), but the suites
# wait on their control planes much of the time: vmstat over the tests of a cold
# clean-clone run at 2 (Dec 2, 45f5cd4) found both cores 28% idle on average
# (docs/testing.md).
TEST_PACKAGES ?= 3
# The longest suites first: go test gives its actions priorities in the order of the
# packages it is given (cmd/go/internal/work/exec.go, depth-first post-order), and ./...
# adds the rest, each package once. At 3 at a time in ./...'s alphabetical order the
# last 200 s ran test/envtest/reliability (241 s) nearly alone (docs/testing.md).
SLOW_TESTS := ./test/e2e ./test/envtest/reliability ./test/envtest/grove ./test/crash ./test/envtest/deployment ./test/haproxy ./test/envtest/plugin
FUZZ_TARGETS := FuzzCompute:./controllers/planner/ FuzzPartitionCounts:./controllers/planner/ FuzzHash:./revisions/ FuzzDGDJSON:./api/v1alpha1/ FuzzAlphaRoundTrip:./api/conversion/ FuzzBetaRoundTrip:./api/conversion/

include hack/tools/tools.mk

.PHONY: all build test unit envtest bench fuzz run manifests generate fmt vet clean

all: build

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

## generate: deepcopy functions for the API types.
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object paths=./api/...

## manifests: the CRD (plus its extraPodSpec fix-up) and RBAC from kubebuilder markers, and
## the Helm chart's RBAC rules from config/rbac (its crds/ is a link to config/crd/bases).
manifests: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./hack/crdfix $(CRD)
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controllers/... paths=./backends/... paths=./traffic/... paths=./cmd/manager/app/... output:rbac:artifacts:config=config/rbac
	go run ./hack/chartrbac

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet:
	go vet ./...

build:
	go build -o $(BIN)/manager ./cmd/manager

## test: every test. Builds the control-plane binaries from pinned modules and installs
## prometheus and haproxy (Debian's packages) when missing (cluster-bins, hack/tools/tools.mk).
test: cluster-bins
	@if [ -n "$$(gofmt -l $$(git ls-files '*.go'))" ]; then echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; fi
	go vet ./...
	KUBEBUILDER_ASSETS=$(BIN) go test -count=1 -p=$(TEST_PACKAGES) -timeout=45m $(SLOW_TESTS) ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

## bench: benchmarks of the planner, hashing and (with the local control plane) rollouts;
## P3 (500 graphs rolled at once, P3_N to change) takes about 15 minutes of it, and its
## variant with 2,000 Deployments and 200 StatefulSets of no DGD left in the cluster as long.
bench: cluster-bins
	KUBEBUILDER_ASSETS=$(BIN) go test -run='^$$' -bench=. -benchmem -timeout=90m ./...

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "go test -run='^$$' -fuzz=$${t%%:*} -fuzztime=$(FUZZTIME) $${t#*:}"; \
		go test -run='^$$' -fuzz="^$${t%%:*}$$" -fuzztime=$(FUZZTIME) "$${t#*:}" || exit 1; \
	done

## run: with KUBECONFIG set, run the operator against that cluster; otherwise start the
## local control plane (test/cluster + LWS controllers), install the CRDs, run the operator and
## apply config/samples/disagg.yaml. Ctrl-C stops everything it started.
run: cluster-bins
	go run ./hack/localrun --assets $(BIN) --crds config/crd/bases --sample config/samples/disagg.yaml

clean:
	rm -rf $(BIN)

## install-plugin: build the kubectl plugin kubectl-dgd into $(PREFIX)/bin when PREFIX is
## set, else into GOBIN (default $(go env GOPATH)/bin), and say where; "kubectl dgd ..."
## finds it on PATH.
.PHONY: install-plugin
install-plugin:
	@if [ -n "$(PREFIX)" ]; then dir="$(PREFIX)/bin"; mkdir -p "$$dir"; go build -o "$$dir/kubectl-dgd" ./cmd/kubectl-dgd; \
	else dir="$$(go env GOBIN)"; dir="$${dir:-$$(go env GOPATH)/bin}"; GOBIN="$$dir" go install ./cmd/kubectl-dgd; fi; \
	echo "installed $$dir/kubectl-dgd"; \
	case ":$$PATH:" in *":$$dir:"*) ;; *) echo "note: $$dir is not on PATH: add it so that kubectl finds the plugin";; esac

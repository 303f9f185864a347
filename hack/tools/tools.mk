# hack/tools/tools.mk — build the control-plane binaries the tests need from
# pinned Go modules (no release downloads; setup-envtest cannot fetch here), and
# install the two tools the tests run from the system's packages.
#
#   make envtest-bins   etcd + kube-apiserver (what controller-runtime envtest needs;
#                       point it at them with KUBEBUILDER_ASSETS=$(BIN))
#   make cluster-bins   the above + kube-controller-manager, kube-scheduler, kwok,
#                       and system-tools
#   make system-tools   prometheus (the analysis steps' tests query a real one) and
#                       haproxy, from Debian's packages when missing from PATH
#                       (hack/tools/system-tools.sh: apt-get, through sudo when not root)
#
# Each binary is a plain file target with no prerequisites: it is built only
# when missing and never rebuilt once present. After bumping a version below
# (or in hack/tools/*/go.mod), delete the binary to rebuild it.
#
# Included by the top-level Makefile; paths are relative to the repo root.

BIN ?= $(CURDIR)/bin
# Debian puts haproxy in /usr/sbin, which a user's PATH there lacks; the tests find it
# on PATH (test/haproxy), so every recipe gets /usr/sbin last.
export PATH := $(PATH):/usr/sbin
TOOLS_DIR ?= $(CURDIR)/hack/tools

# Versions. etcd's is pinned only in hack/tools/etcd/go.mod (it reports it
# itself). KUBERNETES_VERSION must match k8s.io/kubernetes in
# hack/tools/k8s/go.mod; it and the commit below are only stamped into the
# binaries (the commit is the one tag v1.36.2 points at, per the module proxy).
KUBERNETES_VERSION ?= v1.36.2
KUBERNETES_GIT_COMMIT ?= 24e2b02af5543d7910c2bb074c7264df5a8f0467
KUBERNETES_BUILD_DATE ?= 2026-01-01T00:00:00Z
KWOK_VERSION ?= v0.7.0

TOOLS_GO ?= go
# GOWORK=off: the tool modules must build on their own even if a go.work
# appears at the repo root. No -trimpath: the tests are built without it, so the
# packages the tools share with them (the standard library, and, the tool modules'
# versions aligned with go.mod by hack/tools/align.sh, k8s.io/*, grpc, ...) are
# compiled once for both; from an empty cache `go vet ./...` after the tools took
# 123 CPU seconds instead of 278 (docs/testing.md).
TOOLS_GO_BUILD = GOWORK=off $(TOOLS_GO) build -buildvcs=false

# Same variables upstream hack/lib/version.sh sets, in both packages.
_K8S_VERSION_PKGS := k8s.io/component-base/version k8s.io/client-go/pkg/version
_K8S_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(KUBERNETES_VERSION))))
_K8S_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(KUBERNETES_VERSION))))
KUBERNETES_LDFLAGS = -s -w $(foreach p,$(_K8S_VERSION_PKGS), \
	-X $(p).gitVersion=$(KUBERNETES_VERSION) \
	-X $(p).gitMajor=$(_K8S_MAJOR) \
	-X $(p).gitMinor=$(_K8S_MINOR) \
	-X $(p).gitCommit=$(KUBERNETES_GIT_COMMIT) \
	-X $(p).gitTreeState=clean \
	-X $(p).buildDate=$(KUBERNETES_BUILD_DATE))

.PHONY: envtest-bins cluster-bins system-tools align-tools
envtest-bins: $(BIN)/etcd $(BIN)/kube-apiserver
cluster-bins: envtest-bins $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kwok system-tools

# Prometheus and HAProxy are not built: Debian 12's packages (prometheus 2.42, haproxy
# 2.6) install in about 10 s, where building Prometheus from its Go module took about
# 9 min of a cold make test (issue 37). The tests run them from PATH; every query they
# send works on 2.42 and later (docs/testing.md).
system-tools:
	@$(TOOLS_DIR)/system-tools.sh

# align-tools: after a bump of go.mod, raise the tool modules' shared dependencies to
# go.mod's versions, so that their compiled packages stay shared with the tests'.
align-tools:
	$(TOOLS_DIR)/align.sh hack/tools/etcd hack/tools/k8s

$(BIN)/etcd:
	@mkdir -p $(BIN)
	cd $(TOOLS_DIR)/etcd && $(TOOLS_GO_BUILD) -ldflags '-s -w' -o $@ .

# One go build for the three: they share most of their packages, which it compiles once
# (a grouped target, so make runs the recipe once for all three).
$(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler &:
	@mkdir -p $(BIN)
	cd $(TOOLS_DIR)/k8s && $(TOOLS_GO_BUILD) -ldflags '$(strip $(KUBERNETES_LDFLAGS))' -o $(BIN)/ ./kube-apiserver ./kube-controller-manager ./kube-scheduler

$(BIN)/kwok:
	@mkdir -p $(BIN)
	GOWORK=off GOBIN=$(BIN) $(TOOLS_GO) install -buildvcs=false -ldflags '-s -w' sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)

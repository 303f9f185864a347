#!/usr/bin/env bash
# align.sh: raise every module a tool module (hack/tools/etcd, hack/tools/k8s) shares
# with the operator's go.mod to the operator's version, when that is higher, and tidy.
#
# Why: the Go build cache shares a compiled package only when its source, its flags and
# every dependency below it are the same. The tools are built without -trimpath, as
# the tests are, so once their versions match the operator's, the packages both
# compile (the standard library, k8s.io/apimachinery, client-go, apiserver, grpc, ...)
# are compiled once: `go vet ./...` after the tools took 123 CPU seconds instead of 278
# from an empty cache (docs/testing.md, How long make test takes). Nothing checks the
# alignment: when it drifts (a bump of the operator's go.mod), make test only gets
# slower from an empty cache. Run it after such a bump and commit the tool go.mod files.
#
# Kept at the tool's own version: what the tool is (k8s.io/kubernetes and its staging
# modules, go.etcd.io/etcd/*); everything else may rise, never fall.
#
#   hack/tools/align.sh hack/tools/etcd hack/tools/k8s
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
main_mods=$(cd "$root" && GOWORK=off go list -m -f '{{.Path}} {{.Version}}' all)

for dir in "$@"; do
	cd "$root/$dir"
	args=()
	while read -r path tool_version; do
		case $path in k8s.io/kubernetes | go.etcd.io/etcd/*) continue ;; esac
		main_version=$(awk -v p="$path" '$1 == p {print $2}' <<<"$main_mods")
		[ -n "$main_version" ] && [ -n "$tool_version" ] && [ "$main_version" != "$tool_version" ] || continue
		higher=$(printf '%s\n%s\n' "$tool_version" "$main_version" | sort -V | tail -1)
		[ "$higher" = "$main_version" ] && args+=("-require=$path@$main_version")
	done < <(GOWORK=off go list -m -f '{{.Path}} {{.Version}}' all)
	if [ ${#args[@]} -gt 0 ]; then
		GOWORK=off go mod edit "${args[@]}"
		GOWORK=off go mod tidy
	fi
	echo "$dir: ${#args[@]} modules raised to the operator's versions"
done

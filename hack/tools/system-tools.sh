#!/usr/bin/env bash
# system-tools.sh: install what the tests run from the system's packages, when missing:
# prometheus (the analysis steps' tests, the chart's rules and dashboard: 2.42 or later)
# and haproxy (the proxy of traffic routing: 2.6 or later). Debian 12 has exactly those.
#
# A tool counts as present when it is on PATH (make adds /usr/sbin, where Debian puts
# haproxy and which a user's PATH there lacks: hack/tools/tools.mk). Only the missing
# packages are installed, with apt-get, without their recommended packages and without
# asking (-y, DEBIAN_FRONTEND=noninteractive: CI has no stdin). As root (CI) apt-get
# runs as is; otherwise through sudo, and this says so first (sudo -n, which fails
# instead of asking for a password, when stdin is not a terminal). When apt-get cannot
# find a package, the package lists are updated (apt-get update) and it tries again
# once. With no apt-get, or neither root nor sudo, it fails and says what to install.
set -euo pipefail

missing=()
for tool in prometheus haproxy; do
	if ! command -v "$tool" >/dev/null; then
		missing+=("$tool")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

fail() {
	echo "make: $1" >&2
	echo "make: install ${missing[*]} (Debian 12: apt-get install ${missing[*]}; any prometheus 2.42 or later and haproxy 2.6 or later do) and run make again" >&2
	exit 1
}

command -v apt-get >/dev/null || fail "${missing[*]} missing from PATH, and no apt-get to install with"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || fail "${missing[*]} missing from PATH; not root and no sudo to run apt-get with"
	if [ -t 0 ]; then sudo=(sudo); else sudo=(sudo -n); fi
	echo "make: not root: installing ${missing[*]} with ${sudo[*]} apt-get" >&2
fi

install() {
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}
echo "${sudo[*]}${sudo[*]:+ }apt-get install -y --no-install-recommends ${missing[*]}"
if ! install; then
	echo "make: apt-get install failed: updating the package lists (apt-get update) and trying once more" >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q || fail "apt-get update failed"
	install || fail "apt-get install ${missing[*]} failed"
fi
for tool in "${missing[@]}"; do
	command -v "$tool" >/dev/null || fail "apt-get installed ${missing[*]}, yet $tool is not on PATH"
done

#!/usr/bin/env bash
# Runs the end-to-end suite against a kind cluster instead of the local host:
# creates the cluster (unless KIND_CLUSTER names an existing one), loads this build's image
# archives (cargo xtask images), and runs the same scenarios with E2E_HOST=kubeconfig.
# The chart is installed by scenario 1 itself. Needs docker, kind and helm on PATH.
#
# Usage: bash e2e/kind.sh            (KIND_CLUSTER=kcp-e2e by default; KEEP_CLUSTER=1 keeps it)
set -euo pipefail
cd "$(dirname "$0")/.."

cluster="${KIND_CLUSTER:-kcp-e2e}"
for tool in docker kind helm; do
	command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done

if ! kind get clusters | grep -qx "$cluster"; then
	kind create cluster --name "$cluster" --wait 120s
	created=1
fi
cleanup() {
	if [ "${created:-0}" = 1 ] && [ "${KEEP_CLUSTER:-0}" != 1 ]; then
		kind delete cluster --name "$cluster"
	fi
}
trap cleanup EXIT

# The archives land in <target dir>/images; the script prints one line per image.
cargo xtask images --profile release
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
for archive in "$target_dir"/images/*.tar; do
	kind load image-archive "$archive" --name "$cluster"
done

# etcd comes from its public image on a real cluster.
kubeconfig="$(mktemp)"
kind get kubeconfig --name "$cluster" >"$kubeconfig"
E2E_HOST=kubeconfig E2E_KUBECONFIG="$kubeconfig" cargo test -p kcp-e2e --test e2e

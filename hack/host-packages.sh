#!/usr/bin/env bash
# Debian packages the local control plane's real node needs on the host (hack/host-packages.sh).
#
# The real node runs containers with runc and programs Services with iptables; both come from
# Debian, pinned here. Installs only what is missing, quietly; does nothing (exit 0) when not
# root or not on Debian 12, because then the real node cannot run anyway and its tests skip
# with the reason. `make test`, `make demo` and .ci/run call it.
set -euo pipefail

# package=version, as Debian 12 (bookworm) ships them.
PACKAGES=(
  runc=1.1.5+ds1-1+deb12u1       # the OCI runtime containerd's shim runs
  iptables=1.8.9-2               # kube-proxy's iptables mode and the kubelet's canary chains
  nftables=1.0.6-2+deb12u2       # nft: teardown deletes the iptables-nft tables the node created
)

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
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# Hermetic tool builder for infercrane. See hack/tools/README.md.
#
#   hack/tools/build.sh            build whatever is missing, install the kubernetes
#                                  plugin into PULUMI_HOME; last stdout line: "bin: <dir>"
#   hack/tools/build.sh --only F[,F] / --without F[,F]
#                                  build just those families / all but those
#   hack/tools/build.sh --bin-dir  print the absolute bin dir only (no building); KServe's
#                                  CRDs/webhooks/ConfigMap YAML are in its kserve/ subdir
#   hack/tools/build.sh --update   regenerate the wrapper go.mod/go.sum from the pins below
#                                  (maintainers, after a version bump); builds nothing
#   hack/tools/build.sh --vet      `go vet` the wrapper modules that hold Go code (make lint)
#   hack/tools/build.sh --test     `go test` the wrapper modules that hold Go tests (make test)
#   hack/tools/build.sh --kubernetes V [any of the above]
#                                  the same for another Kubernetes version (KUBE_VERSION_SETS):
#                                  its own bin dir, never built by default
#
# Env: INFERCRANE_TOOLS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/infercrane/tools)
#      INFERCRANE_TOOLS_OPTIONAL  space-separated families whose build failure is only a warning
#      PULUMI_HOME              where the kubernetes plugin is installed
#                               (default <repo>/.infercrane/pulumi-home)
set -euo pipefail

# ---------------------------------------------------------------------------
# Pinned versions. Bump here, run `build.sh --update`, commit go.mod/go.sum.
# ---------------------------------------------------------------------------
ETCD_VERSION=v3.6.8              # the etcd that Kubernetes v1.36.3 pins (build/dependencies.yaml)
KUBE_VERSION=v1.36.3             # k8s.io/kubernetes; staging modules -> v0.<minor>.<patch>
PULUMI_VERSION=v3.274.0          # pkg/v3 + sdk/v3; PyPI pulumi is 3.272.0 but the proxy refuses
                                 # pkg/v3 v3.272.0 and v3.273.0, v3.274.0 is the nearest it serves
PULUMI_NEWEST_VERSION=v3.276.0   # pulumi-newest: the other end of the contract suite's range, the
                                 # newest pkg/v3 the proxy serves (PULUMI_VERSION is the oldest)
PULUMI_YAML_VERSION=v1.25.0       # Pulumi YAML's language host: YAML programs that use our component
                                 # package (tests/conformance/test_component_package.py)
PULUMI_K8S_VERSION=4.25.0
PULUMI_K8S_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199   # provider/v4 at the v4.25.0 release commit
KWOK_VERSION=v0.8.0              # simulated nodes for the local control plane
ACTIONLINT_VERSION=v1.7.12       # newest the proxy served when pinned
KUBE_SCORE_VERSION=v1.20.0       # the only version the proxy lists; make lint scores rendered objects
INFERCRANE_NODE_VERSION=v0.1.0   # our own node programs (infercrane-node/); also the images' tag
NODE_GO_TOOLCHAIN=go1.26.8       # infercrane-node only: its images' digests depend on the compiler
CONTAINERD_VERSION=v2.4.2        # the real node's container runtime (runc comes from Debian)
CNI_PLUGINS_VERSION=v1.10.0      # bridge, host-local, loopback for the real node's Pods
VERSITYGW_VERSION=v1.8.0         # S3-compatible server (POSIX backend) for the shared-state tests
KSERVE_VERSION=v0.20.0           # KServe controller (manager) + its CRDs/webhooks/ConfigMap for the local control plane
KIND_VERSION=v0.33.0             # kind + its node image's files (infercrane_dev/kind builds the image)
COREDNS_VERSION=v1.14.2          # the CoreDNS that kubeadm v1.36.3 deploys (Kind's cluster DNS)
# Other Kubernetes versions, built only on request (`--kubernetes VERSION`), each into a bin dir
# of its own, for Kind clusters of the versions users run: the families that follow the
# Kubernetes version, with the etcd and CoreDNS that version's kubeadm deploys
# (cmd/kubeadm/app/constants/constants.go: DefaultEtcdVersion, CoreDNSVersion). Their wrapper
# modules are hack/tools/kubernetes-versions/<VERSION>/<family>/; every other family is the
# default's (the device plugin keeps k8s.io/kubelet at KUBE_VERSION's: its API is v1beta1 in all).
KUBE_VERSION_SETS=(
  "v1.34.4 etcd=v3.6.5 coredns=v1.12.1"   # newest patch of the oldest minor besides 1.36
  "v1.37.2 etcd=v3.7.0 coredns=v1.14.6"   # newest patch of the newest minor
)
VERSIONED_FAMILIES=(kubernetes etcd coredns)

# Module / package paths.
ETCD_PKG=go.etcd.io/etcd/server/v3
KUBE_MOD=k8s.io/kubernetes
PULUMI_PKG_MOD=github.com/pulumi/pulumi/pkg/v3
PULUMI_SDK_MOD=github.com/pulumi/pulumi/sdk/v3
PULUMI_K8S_MOD=github.com/pulumi/pulumi-kubernetes/provider/v4
PULUMI_YAML_MOD=github.com/pulumi/pulumi-yaml
KWOK_MOD=sigs.k8s.io/kwok
ACTIONLINT_MOD=github.com/rhysd/actionlint
KUBE_SCORE_MOD=github.com/zegl/kube-score
KUBELET_MOD=k8s.io/kubelet
KUBELET_VERSION=v0.${KUBE_VERSION#v1.}   # the device-plugin API of the Kubernetes we run
NODE_MOD=infercrane/hack/tools/infercrane-node
CONTAINERD_MOD=github.com/containerd/containerd/v2
CNI_PLUGINS_MOD=github.com/containernetworking/plugins
VERSITYGW_MOD=github.com/versity/versitygw
KSERVE_MOD=github.com/kserve/kserve
KIND_MOD=sigs.k8s.io/kind
COREDNS_MOD=github.com/coredns/coredns
# KServe CRDs copied verbatim from the module into <bin>/kserve/crds/ (see copy_kserve_config).
KSERVE_CRDS=(inferenceservices servingruntimes clusterservingruntimes trainedmodels inferencegraphs
             clusterstoragecontainers)
# What upstream's kustomize config/default installs to run KServe's manager inside a cluster
# (infercrane_dev/kind): config/<file> copied verbatim into <bin>/kserve/install/<file>.
KSERVE_INSTALL_FILES=(manager/manager.yaml webhook/service.yaml rbac/service_account.yaml rbac/role.yaml
                      rbac/role_binding.yaml rbac/leader_election_role.yaml
                      rbac/leader_election_role_binding.yaml)
# kind's node files (images/base/files/ of the kind module), copied verbatim into <bin>/kind-node/
# (see copy_kind_files); infercrane_dev/kind builds the node image from them.
KIND_NODE_FILES=(LICENSES/README.txt etc/containerd/config.toml etc/crictl.yaml etc/default/kubelet
                 etc/sysctl.d/10-network-magic.conf etc/sysctl.d/10-network-security.conf
                 etc/systemd/system/containerd.service etc/systemd/system/kubelet.service
                 etc/systemd/system/kubelet.service.d/10-kubeadm.conf
                 etc/systemd/system/kubelet.service.d/11-kind.conf etc/systemd/system/kubelet.slice
                 etc/systemd/system/undo-mount-hacks.service kind/README.txt
                 kind/bin/create-kubelet-cgroup-v2.sh kind/bin/mount-product-files.sh
                 kind/bin/undo-mount-hacks.sh usr/local/bin/clean-install usr/local/bin/entrypoint)
# Storage drivers the real node never uses, and which need cgo or kernel headers.
CONTAINERD_TAGS="no_btrfs no_devmapper no_zfs"
CNI_PLUGINS=(main/bridge ipam/host-local main/loopback)

# Build order; each family is one wrapper module in hack/tools/<family>.
FAMILIES=(etcd kubernetes pulumi language-hosts pulumi-language-yaml pulumi-kubernetes pulumi-newest kwok actionlint
          kube-score containerd cni-plugins infercrane-node versitygw kserve kind coredns)

TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$TOOLS_DIR/../.." && pwd -P)
CACHE_ROOT=${INFERCRANE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infercrane/tools}
mkdir -p "$CACHE_ROOT"
CACHE_ROOT=$(cd "$CACHE_ROOT" && pwd -P)

export GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off CGO_ENABLED=0 GO111MODULE=on

log() { echo "build.sh: $*" >&2; }
die() { echo "build.sh: ERROR: $*" >&2; exit 1; }

# --kubernetes VERSION (first): the versioned families' pins and wrapper modules of that set.
# KUBELET_VERSION was derived above and stays the default's.
VERSION_DIR=
KUBE_ARGS=()
if [[ ${1-} == --kubernetes ]]; then
  [[ $# -ge 2 ]] || die "--kubernetes takes a version (one of: ${KUBE_VERSION_SETS[*]%% *})"
  if [[ $2 != "$KUBE_VERSION" ]]; then
    for entry in "${KUBE_VERSION_SETS[@]}"; do
      read -r version etcd coredns <<<"$entry"
      [[ $version == "$2" ]] || continue
      KUBE_VERSION=$version ETCD_VERSION=${etcd#etcd=} COREDNS_VERSION=${coredns#coredns=}
      VERSION_DIR=$TOOLS_DIR/kubernetes-versions/$version
      KUBE_ARGS=(--kubernetes "$version")
    done
    [[ -n $VERSION_DIR ]] || die "--kubernetes $2: no such set (one of: $KUBE_VERSION ${KUBE_VERSION_SETS[*]%% *})"
  fi
  shift 2
fi

# family_dir <family>: its wrapper module (another Kubernetes version's, for a versioned family).
family_dir() {
  if [[ -n $VERSION_DIR && " ${VERSIONED_FAMILIES[*]} " == *" $1 "* ]]; then
    echo "$VERSION_DIR/$1"
  else
    echo "$TOOLS_DIR/$1"
  fi
}
command -v go >/dev/null || die "go is not on PATH"

GOVERSION=$(go env GOVERSION)
GOOSARCH=$(go env GOOS)/$(go env GOARCH)

family_outputs() {
  case $1 in
    etcd) echo etcd ;;
    kubernetes) echo kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubeadm kubectl ;;
    pulumi) echo pulumi pulumi-language-python-exec ;;
    language-hosts) echo pulumi-language-python pulumi-language-nodejs ;;
    pulumi-language-yaml) echo pulumi-language-yaml ;;
    pulumi-kubernetes) echo pulumi-resource-kubernetes ;;
    pulumi-newest) echo pulumi-newest/bin/pulumi ;;
    kwok) echo kwok ;;
    actionlint) echo actionlint ;;
    kube-score) echo kube-score ;;
    infercrane-node) echo infercrane-standin infercrane-pause infercrane-gpu-device-plugin infercrane-runc-capfilter ;;
    containerd) echo containerd containerd-shim-runc-v2 ctr ;;
    cni-plugins) echo "${CNI_PLUGINS[@]##*/}" ;;
    versitygw) echo versitygw ;;
    kserve) echo kserve-manager ;;
    kind) echo kind ;;
    coredns) echo coredns ;;
  esac
}

# family_data <family>: non-executable files the family puts next to its binaries, relative to
# the bin dir (hard-linked like the binaries). kserve: upstream's YAML, see copy_kserve_config.
family_data() {
  local crd
  case $1 in
    kserve)
      for crd in "${KSERVE_CRDS[@]}"; do echo "kserve/crds/serving.kserve.io_$crd.yaml"; done
      echo kserve/webhook.yaml kserve/inferenceservice-config.yaml
      printf 'kserve/install/%s\n' "${KSERVE_INSTALL_FILES[@]}" ;;
    kind) printf 'kind-node/%s\n' "${KIND_NODE_FILES[@]}" ;;
  esac
}

# family_links <family>: "<from> <to>" pairs of binaries of other families (earlier in FAMILIES)
# hard-linked again into this family's own bin dir, relative to the bin dir. pulumi-newest: its
# CLI beside the same language host, exec shim and kubernetes provider as the pinned CLI's, so
# that it alone differs (`PulumiEnvironment(bin_dir=<bin>/pulumi-newest/bin)`).
family_links() {
  local b
  case $1 in
    pulumi-newest)
      for b in pulumi-language-python pulumi-language-python-exec pulumi-resource-kubernetes; do
        echo "$b pulumi-newest/bin/$b"
      done ;;
  esac
}

family_pins() {
  case $1 in
    etcd) echo "$ETCD_PKG@$ETCD_VERSION" ;;
    kubernetes) echo "$KUBE_MOD@$KUBE_VERSION" ;;
    pulumi) echo "$PULUMI_PKG_MOD@$PULUMI_VERSION $PULUMI_SDK_MOD@$PULUMI_VERSION" ;;
    language-hosts) echo "hack/tools/language-hosts on $PULUMI_PKG_MOD@$PULUMI_VERSION $PULUMI_SDK_MOD@$PULUMI_VERSION" ;;
    pulumi-language-yaml) echo "$PULUMI_YAML_MOD@$PULUMI_YAML_VERSION" ;;
    pulumi-kubernetes) echo "$PULUMI_K8S_MOD@$PULUMI_K8S_MODULE_VERSION version=$PULUMI_K8S_VERSION" ;;
    pulumi-newest) echo "$PULUMI_PKG_MOD@$PULUMI_NEWEST_VERSION $PULUMI_SDK_MOD@$PULUMI_NEWEST_VERSION" ;;
    kwok) echo "$KWOK_MOD@$KWOK_VERSION" ;;
    actionlint) echo "$ACTIONLINT_MOD@$ACTIONLINT_VERSION" ;;
    kube-score) echo "$KUBE_SCORE_MOD@$KUBE_SCORE_VERSION" ;;
    infercrane-node) echo "hack/tools/infercrane-node $INFERCRANE_NODE_VERSION on $KUBELET_MOD@$KUBELET_VERSION" ;;
    containerd) echo "$CONTAINERD_MOD@$CONTAINERD_VERSION tags=$CONTAINERD_TAGS" ;;
    cni-plugins) echo "$CNI_PLUGINS_MOD@$CNI_PLUGINS_VERSION plugins=${CNI_PLUGINS[*]}" ;;
    versitygw) echo "$VERSITYGW_MOD@$VERSITYGW_VERSION" ;;
    kserve) echo "$KSERVE_MOD@$KSERVE_VERSION crds=${KSERVE_CRDS[*]} install=${KSERVE_INSTALL_FILES[*]}" ;;
    kind) echo "$KIND_MOD@$KIND_VERSION files=${KIND_NODE_FILES[*]}" ;;
    coredns) echo "$COREDNS_MOD@$COREDNS_VERSION" ;;
  esac
}

# family_go <family>: the Go toolchain that builds it. Reproducible image digests need the
# exact compiler, so infercrane-node pins one (GOTOOLCHAIN fetches it from the proxy if the
# local go differs); the others build with the local go.
family_go() {
  case $1 in
    infercrane-node) echo "$NODE_GO_TOOLCHAIN" ;;
    *) echo "$GOVERSION" ;;
  esac
}

# -X flags that do not depend on the module cache (they are part of the cache key).
family_xflags() {
  local minor
  case $1 in
    kubernetes)
      minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
      local p
      for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        printf -- "-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s " "$p" "$KUBE_VERSION" "$p" "$p" "$minor"
      done ;;
    pulumi|language-hosts|pulumi-newest)
      printf -- "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=%s" "$(pulumi_version "$1")" ;;
    pulumi-language-yaml)
      printf -- "-X %s/pkg/version.Version=%s" "$PULUMI_YAML_MOD" "$PULUMI_YAML_VERSION" ;;
    pulumi-kubernetes)
      printf -- "-X %s/pkg/version.Version=%s" "$PULUMI_K8S_MOD" "$PULUMI_K8S_VERSION" ;;
    kwok)
      # Upstream's release build stamps the version without its "v" (kwok prints it with one).
      printf -- "-X %s/pkg/consts.Version=%s" "$KWOK_MOD" "${KWOK_VERSION#v}" ;;
    actionlint)
      # Built from our wrapper module, debug.BuildInfo would report "(devel)".
      printf -- "-X %s.version=%s" "$ACTIONLINT_MOD" "$ACTIONLINT_VERSION" ;;
    kube-score)
      # What upstream's release build stamps into cmd/kube-score (`kube-score version`).
      printf -- "-X main.version=%s" "${KUBE_SCORE_VERSION#v}" ;;
    infercrane-node)
      printf -- "-X %s/internal/version.Version=%s" "$NODE_MOD" "$INFERCRANE_NODE_VERSION" ;;
    containerd)
      # What upstream's Makefile stamps from `git describe`; the proxy gives no commit to stamp.
      printf -- "-X %s/version.Version=%s" "$CONTAINERD_MOD" "$CONTAINERD_VERSION" ;;
    cni-plugins)
      printf -- "-X %s/pkg/utils/buildversion.BuildVersion=%s" "$CNI_PLUGINS_MOD" "$CNI_PLUGINS_VERSION" ;;
    versitygw)
      # What upstream's Makefile stamps as main.Version (Build and BuildTime stay unset).
      printf -- "-X main.Version=%s" "$VERSITYGW_VERSION" ;;
  esac
}

# pulumi_version <family>: the Pulumi release a pulumi family builds on.
pulumi_version() {
  case $1 in
    pulumi-newest) echo "$PULUMI_NEWEST_VERSION" ;;
    *) echo "$PULUMI_VERSION" ;;
  esac
}

short_hash() { sha256sum | cut -c1-12; }

# nested_go_files <family>: Go files below the wrapper dir's top level, sorted (packages of a
# module with several commands, e.g. infercrane-node/cmd/*, internal/*).
nested_go_files() {
  local from
  from=$(family_dir "$1")
  [[ -d $from ]] || return 0  # another version's, before its first --update
  (cd "$from" && find . -mindepth 2 -name '*.go' | LC_ALL=C sort | sed 's|^\./||')
}

# copy_nested_go_files <family> <dir>: those files, their directories kept, into a scratch copy.
copy_nested_go_files() {
  local f
  local from
  from=$(family_dir "$1")
  while IFS= read -r f; do install -D -m 0644 "$from/$f" "$2/$f"; done < <(nested_go_files "$1")
}

family_key() {
  local fam=$1 f from
  from=$(family_dir "$fam")
  {
    echo "family=$fam go=$(family_go "$fam") target=$GOOSARCH cgo=0 trimpath ldflags=-s -w $(family_xflags "$fam")"
    echo "pins=$(family_pins "$fam")"
    for f in "$from"/go.mod "$from"/go.sum "$from"/*.go; do
      if [[ -f $f ]]; then echo "file=${f##*/}"; cat "$f"; fi
    done
    while IFS= read -r f; do echo "file=$f"; cat "$from/$f"; done < <(nested_go_files "$fam")
  } | short_hash
}

overall_key() {
  local fam
  for fam in "${FAMILIES[@]}"; do echo "$fam $(family_key "$fam")"; done | short_hash
}

BIN_DIR="$CACHE_ROOT/$(overall_key)/bin"

if [[ ${1-} == --bin-dir ]]; then
  echo "$BIN_DIR"
  exit 0
fi

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

# mod_field <module@version> <Field>: a field of `go mod download -json` (downloads if needed).
mod_field() {
  local out
  out=$(cd "${SCRATCH_CWD:-/}" && go mod download -json "$1" 2>&1) || { echo "$out" >&2; return 1; }
  printf '%s\n' "$out" | sed -n "s/^[[:space:]]*\"$2\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" | head -n1
}

# explain_go_failure <family> <what> <logfile>: name the module/version the proxy refused.
explain_go_failure() {
  local fam=$1 what=$2 logf=$3 line mv msg
  echo "build.sh: ERROR [$fam]: $what failed." >&2
  while IFS= read -r line; do
    mv=${line%%: *}; msg=${line#*: }
    if [[ $msg =~ (403|404|410)\  || $msg == *"not available"* || $msg == *"unknown revision"* ]]; then
      echo "build.sh: ERROR [$fam]: the Go module proxy refused module ${mv%@*} version ${mv##*@}: $msg" >&2
    else
      echo "build.sh: ERROR [$fam]: module ${mv%@*} version ${mv##*@}: $msg" >&2
    fi
  done < <(grep -Eo '[A-Za-z0-9._~/-]+@v[^: ]+: .*' "$logf" | awk '!seen[$0]++' | head -n 5)
  grep -h "server response" "$logf" | awk '!seen[$0]++' | sed "s/^[[:space:]]*/build.sh: ERROR [$fam]: proxy said: /" >&2 || true
  echo "build.sh: ---- last lines of $logf ----" >&2
  tail -n 15 "$logf" >&2
}

# run_go <family> <what> <cmd...>: run a go command, log to file, explain failures.
run_go() {
  local fam=$1 what=$2; shift 2
  local logf="$LOG_DIR/$fam.log"
  echo "+ $*" >>"$logf"
  if ! "$@" >>"$logf" 2>&1; then
    explain_go_failure "$fam" "$what" "$logf"
    return 1
  fi
}

# upstream_replaces <go.mod file>: print "old[@v] new[@v]" for each replace directive.
upstream_replaces() {
  sed 's://.*$::' "$1" | awk '
    /^replace[ \t]*\(/ { inblock = 1; next }
    inblock && /^[ \t]*\)/ { inblock = 0; next }
    {
      line = $0
      if (!inblock) { if (line !~ /^replace[ \t]/) next; sub(/^replace[ \t]+/, "", line) }
      sub(/^[ \t]+/, "", line); sub(/[ \t]+$/, "", line)
      if (line == "") next
      k = split(line, t, /[ \t]+/); a = 0
      for (i = 1; i <= k; i++) if (t[i] == "=>") a = i
      if (a == 0) next
      old = t[1]; if (a == 3) old = old "@" t[2]
      nw = t[a + 1]; if (k == a + 2) nw = nw "@" t[a + 2]
      print old, nw
    }'
}

# mirror_replaces <module@version>: upstream's non-local replace directives, in this module.
mirror_replaces() {
  local gomod old new
  gomod=$(mod_field "$1" GoMod) || return 1
  while read -r old new; do
    [[ $new == ./* || $new == ../* ]] || go mod edit -replace="$old=$new"
  done < <(upstream_replaces "$gomod")
}

# family_prepare <family> <scratch dir>: module-level edits needed before `go mod tidy` (update)
# and before building (copies of generated/ignored inputs).
family_prepare() {
  local fam=$1 dir=$2 mdir
  case $fam in
    pulumi-kubernetes)
      mdir=$(SCRATCH_CWD=$dir mod_field "$PULUMI_K8S_MOD@$PULUMI_K8S_MODULE_VERSION" Dir) || return 1
      install -m 0644 "$mdir/cmd/pulumi-resource-kubernetes/schema.json" "$dir/schema.json"
      install -m 0644 "$mdir/cmd/pulumi-resource-kubernetes/terraform-mapping.json" "$dir/terraform-mapping.json" ;;
  esac
}

# copy_kserve_config <src dir> <dest dir>: the YAML the local control plane applies, copied
# verbatim from the kserve module (the same files upstream's kustomize config/default starts from):
#   config/crd/full/[<sub>/]serving.kserve.io_<crd>.yaml -> crds/serving.kserve.io_<crd>.yaml
#   config/webhook/manifests.yaml                       -> webhook.yaml (still holds kustomize's
#       $(webhookServiceName)/$(kserveNamespace) placeholders and no caBundle)
#   config/configmap/inferenceservice.yaml               -> inferenceservice-config.yaml
#       (ConfigMap inferenceservice-config in namespace kserve)
#   config/<KSERVE_INSTALL_FILES>                        -> install/ (Kind's in-cluster KServe)
copy_kserve_config() {
  local src=$1 dest=$2 mdir crd f
  mdir=$(cd "$src" && go list -m -f '{{.Dir}}' "$KSERVE_MOD") || return 1
  [[ -n $mdir ]] || { echo "build.sh: ERROR [kserve]: no module dir for $KSERVE_MOD" >&2; return 1; }
  mkdir -p "$dest/crds"
  for crd in "${KSERVE_CRDS[@]}"; do
    f=$(find "$mdir/config/crd/full" -name "serving.kserve.io_$crd.yaml" | head -n1)
    [[ -n $f ]] || { echo "build.sh: ERROR [kserve]: serving.kserve.io_$crd.yaml not in $mdir/config/crd/full" >&2; return 1; }
    install -m 0644 "$f" "$dest/crds/"
  done
  install -m 0644 "$mdir/config/webhook/manifests.yaml" "$dest/webhook.yaml"
  install -m 0644 "$mdir/config/configmap/inferenceservice.yaml" "$dest/inferenceservice-config.yaml"
  for f in "${KSERVE_INSTALL_FILES[@]}"; do
    install -D -m 0644 "$mdir/config/$f" "$dest/install/$f"
  done
}

# copy_kind_files <src dir> <dest dir>: kind's node image files (images/base/files/), verbatim,
# for infercrane_dev/kind: the builder gives them the modes kind's base Dockerfile gives them.
copy_kind_files() {
  local src=$1 dest=$2 mdir f
  mdir=$(cd "$src" && go list -m -f '{{.Dir}}' "$KIND_MOD") || return 1
  [[ -n $mdir ]] || { echo "build.sh: ERROR [kind]: no module dir for $KIND_MOD" >&2; return 1; }
  for f in "${KIND_NODE_FILES[@]}"; do
    [[ -f $mdir/images/base/files/$f ]] || { echo "build.sh: ERROR [kind]: images/base/files/$f not in $mdir" >&2; return 1; }
    install -D -m 0644 "$mdir/images/base/files/$f" "$dest/$f"
  done
}

# ---------------------------------------------------------------------------
# --update: regenerate wrapper go.mod/go.sum from the pins
# ---------------------------------------------------------------------------
update_family() {
  local fam=$1 dir gomod old new minor patch tools=() plugin version wrapper
  wrapper=$(family_dir "$fam")
  dir=$(mktemp -d "${TMPDIR:-/tmp}/infercrane-update-$fam.XXXXXX")
  mkdir -p "$wrapper"
  cp "$wrapper"/*.go "$dir"/ 2>/dev/null || true
  copy_nested_go_files "$fam" "$dir"
  printf 'module infercrane/hack/tools/%s\n\ngo 1.26.0\n' "$fam" >"$dir/go.mod"
  export SCRATCH_CWD=$dir
  log "update [$fam]"
  (
    cd "$dir"
    case $fam in
      etcd)
        go get -tool "$ETCD_PKG@$ETCD_VERSION" ;;
      kubernetes)
        gomod=$(mod_field "$KUBE_MOD@$KUBE_VERSION" GoMod)
        minor=${KUBE_VERSION#v1.}; patch=${minor#*.}; minor=${minor%%.*}
        while read -r old new; do
          if [[ $new == ./staging/src/k8s.io/* ]]; then
            go mod edit -replace="$old=$old@v0.$minor.$patch"
          elif [[ $new != ./* && $new != ../* ]]; then
            go mod edit -replace="$old=$new"
          fi
        done < <(upstream_replaces "$gomod")
        go get -tool "$KUBE_MOD/cmd/kube-apiserver@$KUBE_VERSION" "$KUBE_MOD/cmd/kube-controller-manager@$KUBE_VERSION" \
          "$KUBE_MOD/cmd/kube-scheduler@$KUBE_VERSION" "$KUBE_MOD/cmd/kubelet@$KUBE_VERSION" \
          "$KUBE_MOD/cmd/kube-proxy@$KUBE_VERSION" "$KUBE_MOD/cmd/kubeadm@$KUBE_VERSION" \
          "$KUBE_MOD/cmd/kubectl@$KUBE_VERSION" ;;
      pulumi|pulumi-newest)
        version=$(pulumi_version "$fam")
        mirror_replaces "$PULUMI_PKG_MOD@$version"
        go mod edit -require="$PULUMI_PKG_MOD@$version" -require="$PULUMI_SDK_MOD@$version"
        go get -tool "$PULUMI_PKG_MOD/cmd/pulumi@$version" ;;
      language-hosts)
        # Our own hosts (cmd/*): the proxy refuses Pulumi's host modules, see their main.go. The
        # Node.js host generates SDKs with pkg/v3's code generator, so the module mirrors pkg's
        # replaces as the pulumi family does.
        mirror_replaces "$PULUMI_PKG_MOD@$PULUMI_VERSION"
        go mod edit -require="$PULUMI_PKG_MOD@$PULUMI_VERSION" -require="$PULUMI_SDK_MOD@$PULUMI_VERSION" ;;
      pulumi-language-yaml)
        mirror_replaces "$PULUMI_YAML_MOD@$PULUMI_YAML_VERSION"
        go get -tool "$PULUMI_YAML_MOD/cmd/pulumi-language-yaml@$PULUMI_YAML_VERSION" ;;
      pulumi-kubernetes)
        gomod=$(mod_field "$PULUMI_K8S_MOD@$PULUMI_K8S_MODULE_VERSION" GoMod)
        while read -r old new; do
          if [[ $old == github.com/pulumi/pulumi-kubernetes/sdk/v4 && $new == ../sdk ]]; then
            # upstream builds against the sdk of the same commit: the release's sdk/v4 tag
            go mod edit -require="$old@v$PULUMI_K8S_VERSION"
          elif [[ $new != ./* && $new != ../* ]]; then
            go mod edit -replace="$old=$new"
          fi
        done < <(upstream_replaces "$gomod")
        family_prepare "$fam" "$dir"
        go get "$PULUMI_K8S_MOD@$PULUMI_K8S_MODULE_VERSION" ;;
      kwok)
        mirror_replaces "$KWOK_MOD@$KWOK_VERSION"
        go get -tool "$KWOK_MOD/cmd/kwok@$KWOK_VERSION" ;;
      actionlint)
        go get -tool "$ACTIONLINT_MOD/cmd/actionlint@$ACTIONLINT_VERSION" ;;
      kube-score)
        mirror_replaces "$KUBE_SCORE_MOD@$KUBE_SCORE_VERSION"
        go get -tool "$KUBE_SCORE_MOD/cmd/kube-score@$KUBE_SCORE_VERSION" ;;
      infercrane-node)
        # Our own code; grpc and protobuf come at the versions k8s.io/kubelet requires.
        go mod edit -require="$KUBELET_MOD@$KUBELET_VERSION" ;;
      containerd)
        mirror_replaces "$CONTAINERD_MOD@$CONTAINERD_VERSION"
        go get -tool "$CONTAINERD_MOD/cmd/containerd@$CONTAINERD_VERSION" \
          "$CONTAINERD_MOD/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$CONTAINERD_MOD/cmd/ctr@$CONTAINERD_VERSION" ;;
      cni-plugins)
        for plugin in "${CNI_PLUGINS[@]}"; do tools+=("$CNI_PLUGINS_MOD/plugins/$plugin@$CNI_PLUGINS_VERSION"); done
        go get -tool "${tools[@]}" ;;
      versitygw)
        mirror_replaces "$VERSITYGW_MOD@$VERSITYGW_VERSION"
        go get -tool "$VERSITYGW_MOD/cmd/versitygw@$VERSITYGW_VERSION" ;;
      kserve)
        mirror_replaces "$KSERVE_MOD@$KSERVE_VERSION"
        go get -tool "$KSERVE_MOD/cmd/manager@$KSERVE_VERSION" ;;
      kind)
        mirror_replaces "$KIND_MOD@$KIND_VERSION"
        go get -tool "$KIND_MOD@$KIND_VERSION" ;;
      coredns)
        mirror_replaces "$COREDNS_MOD@$COREDNS_VERSION"
        go get -tool "$COREDNS_MOD@$COREDNS_VERSION" ;;
    esac
    go mod tidy
    cp go.mod go.sum "$wrapper/"
  ) || die "--update $fam failed (see the go output above); ${wrapper#"$REPO_ROOT"/} is unchanged"
  rm -rf "$dir"
}

if [[ ${1-} == --update ]]; then
  shift
  updatable=("${FAMILIES[@]}")
  [[ -z $VERSION_DIR ]] || updatable=("${VERSIONED_FAMILIES[@]}")
  if (( $# )); then fams=("$@"); else fams=("${updatable[@]}"); fi
  for fam in "${fams[@]}"; do
    [[ " ${updatable[*]} " == *" $fam "* ]] || die "cannot update '$fam' here (one of: ${updatable[*]})"
    update_family "$fam"
  done
  log "updated; new bin dir would be $("$TOOLS_DIR/build.sh" "${KUBE_ARGS[@]}" --bin-dir)"
  exit 0
fi
# ---------------------------------------------------------------------------
# --vet / --test: `go vet` every wrapper module that holds Go code, `go test` every one that
# holds Go tests, in a scratch copy (the repo is never written; generated inputs come from
# family_prepare)
# ---------------------------------------------------------------------------
# check_family <family> <vet|test>
check_family() {
  local fam=$1 verb=$2 dir rc=0 from
  from=$(family_dir "$fam")
  dir=$(mktemp -d "${TMPDIR:-/tmp}/infercrane-$verb-$fam.XXXXXX")
  cp "$from"/go.mod "$from"/go.sum "$dir"/
  cp "$from"/*.go "$dir"/ 2>/dev/null || true
  copy_nested_go_files "$fam" "$dir"
  # -trimpath as in the build: the dependencies' compiled export data then comes from the build
  # cache (a cold vet of pulumi-kubernetes otherwise recompiles everything, ~5 min here).
  if ! (export SCRATCH_CWD=$dir; family_prepare "$fam" "$dir" && cd "$dir" && go "$verb" -trimpath ./...); then
    echo "build.sh: ERROR [$fam]: go $verb failed (hack/tools/$fam)" >&2
    rc=1
  fi
  rm -rf "$dir"
  return "$rc"
}

if [[ ${1-} == --vet || ${1-} == --test ]]; then
  [[ $# -eq 1 ]] || die "$1 takes no argument"
  verb=${1#--} failed=()
  if [[ $verb == vet ]]; then pattern='*.go'; else pattern='*_test.go'; fi
  for fam in "${FAMILIES[@]}"; do
    [[ -n $(find "$(family_dir "$fam")" -name "$pattern" -print -quit) ]] || continue
    echo "go $verb hack/tools/$fam"
    check_family "$fam" "$verb" || failed+=("$fam")
  done
  (( ${#failed[@]} == 0 )) || die "go $verb failed: ${failed[*]}"
  exit 0
fi
# --only F[,F...] / --without F[,F...]: build just those families, or every other one (make test
# builds KServe's, the slowest, in the background while the other suites run).
SELECTED=("${FAMILIES[@]}")
if [[ ${1-} == --only || ${1-} == --without ]]; then
  [[ $# -eq 2 ]] || die "$1 takes one comma-separated list of families"
  IFS=, read -r -a listed <<<"$2"
  for fam in "${listed[@]}"; do
    [[ " ${FAMILIES[*]} " == *" $fam "* ]] || die "unknown family: $fam (families: ${FAMILIES[*]})"
  done
  if [[ $1 == --only ]]; then
    SELECTED=("${listed[@]}")
  else
    SELECTED=()
    for fam in "${FAMILIES[@]}"; do [[ " ${listed[*]} " == *" $fam "* ]] || SELECTED+=("$fam"); done
  fi
  shift 2
fi
[[ $# -eq 0 ]] || die "unknown argument: $1 (use no argument, --only, --without, --bin-dir, --update, --vet or --test)"

# ---------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------
STORE="$CACHE_ROOT/store"
LOG_DIR="$CACHE_ROOT/logs"
mkdir -p "$STORE" "$LOG_DIR"
# Taken only to write: a run that finds its families complete never waits for another's build.
lock_cache() {
  exec 9>"$CACHE_ROOT/.lock"
  if command -v flock >/dev/null; then flock 9; fi
}

LDBASE="-s -w"
now() { date +%s; }

# go_build <family> <srcdir> <out> <pkg> <ldflags> <module@version for messages> [build tags]
go_build() {
  local fam=$1 src=$2 out=$3 pkg=$4 ldflags=$5 what=$6 tags=${7-} t0
  t0=$(now)
  echo "[$fam] building ${out##*/} from $what ..."
  (cd "$src" && run_go "$fam" "go build of $pkg ($what)" go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out" "$pkg") || return 1
  echo "[$fam] built ${out##*/} in $(( $(now) - t0 ))s ($(du -h "$out" | cut -f1))"
}

# check_pin <family> <srcdir> <module> <version>: the wrapper go.mod must agree with build.sh.
check_pin() {
  local have
  have=$(cd "$2" && go mod edit -json | tr -d '\n' | grep -Eo "\"Path\": \"$3\",[[:space:]]*\"Version\": \"[^\"]+\"" | head -n1 | sed 's/.*"Version": "//; s/"$//') || true
  if [[ $have != "$4" ]]; then
    echo "build.sh: ERROR [$1]: $(family_dir "$1" | sed "s|^$REPO_ROOT/||")/go.mod has $3 ${have:-<missing>} but build.sh pins $4; run hack/tools/build.sh ${KUBE_ARGS[*]} --update $1" >&2
    return 1
  fi
}

build_family() {
  local fam=$1 out=$2 src=$3 t0 x mdir date cmd plugin
  x=$(family_xflags "$fam")
  t0=$(now)
  echo "[$fam] downloading modules ..."
  (cd "$src" && run_go "$fam" "go mod download" go mod download) || return 1
  family_prepare "$fam" "$src" >>"$LOG_DIR/$fam.log" 2>&1 || { explain_go_failure "$fam" "preparing sources" "$LOG_DIR/$fam.log"; return 1; }
  echo "[$fam] modules ready in $(( $(now) - t0 ))s"
  case $fam in
    etcd)
      check_pin "$fam" "$src" "$ETCD_PKG" "$ETCD_VERSION" || return 1
      go_build "$fam" "$src" "$out/etcd" "$ETCD_PKG" "$LDBASE" "$ETCD_PKG@$ETCD_VERSION" ;;
    kubernetes)
      check_pin "$fam" "$src" "$KUBE_MOD" "$KUBE_VERSION" || return 1
      # buildDate: the release's commit time, so rebuilds are reproducible.
      date=$(cd "$src" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$KUBE_MOD")
      x="$x -X k8s.io/component-base/version.buildDate=$date -X k8s.io/client-go/pkg/version.buildDate=$date"
      go_build "$fam" "$src" "$out/kube-apiserver" "$KUBE_MOD/cmd/kube-apiserver" "$LDBASE $x" "$KUBE_MOD@$KUBE_VERSION" || return 1
      go_build "$fam" "$src" "$out/kube-controller-manager" "$KUBE_MOD/cmd/kube-controller-manager" "$LDBASE $x" "$KUBE_MOD@$KUBE_VERSION" || return 1
      for cmd in kube-scheduler kubelet kube-proxy kubeadm kubectl; do
        go_build "$fam" "$src" "$out/$cmd" "$KUBE_MOD/cmd/$cmd" "$LDBASE $x" "$KUBE_MOD@$KUBE_VERSION" || return 1
      done ;;
    pulumi)
      check_pin "$fam" "$src" "$PULUMI_PKG_MOD" "$PULUMI_VERSION" || return 1
      check_pin "$fam" "$src" "$PULUMI_SDK_MOD" "$PULUMI_VERSION" || return 1
      go_build "$fam" "$src" "$out/pulumi" "$PULUMI_PKG_MOD/cmd/pulumi" "$LDBASE $x" "$PULUMI_PKG_MOD@$PULUMI_VERSION" || return 1
      mdir=$(cd "$src" && go list -m -f '{{.Dir}}' "$PULUMI_SDK_MOD")
      install -m 0755 "$mdir/python/cmd/pulumi-language-python-exec" "$out/pulumi-language-python-exec"
      echo "[$fam] copied pulumi-language-python-exec from $PULUMI_SDK_MOD@$PULUMI_VERSION" ;;
    pulumi-newest)
      check_pin "$fam" "$src" "$PULUMI_PKG_MOD" "$PULUMI_NEWEST_VERSION" || return 1
      check_pin "$fam" "$src" "$PULUMI_SDK_MOD" "$PULUMI_NEWEST_VERSION" || return 1
      mkdir -p "$out/pulumi-newest/bin"
      go_build "$fam" "$src" "$out/pulumi-newest/bin/pulumi" "$PULUMI_PKG_MOD/cmd/pulumi" "$LDBASE $x" "$PULUMI_PKG_MOD@$PULUMI_NEWEST_VERSION" ;;
    language-hosts)
      check_pin "$fam" "$src" "$PULUMI_PKG_MOD" "$PULUMI_VERSION" || return 1
      check_pin "$fam" "$src" "$PULUMI_SDK_MOD" "$PULUMI_VERSION" || return 1
      for b in $(family_outputs "$fam"); do
        go_build "$fam" "$src" "$out/$b" "./cmd/$b" "$LDBASE $x" \
          "hack/tools/language-hosts on $PULUMI_PKG_MOD@$PULUMI_VERSION" || return 1
      done ;;
    pulumi-language-yaml)
      check_pin "$fam" "$src" "$PULUMI_YAML_MOD" "$PULUMI_YAML_VERSION" || return 1
      go_build "$fam" "$src" "$out/pulumi-language-yaml" "$PULUMI_YAML_MOD/cmd/pulumi-language-yaml" "$LDBASE $x" \
        "$PULUMI_YAML_MOD@$PULUMI_YAML_VERSION" ;;
    pulumi-kubernetes)
      check_pin "$fam" "$src" "$PULUMI_K8S_MOD" "$PULUMI_K8S_MODULE_VERSION" || return 1
      go_build "$fam" "$src" "$out/pulumi-resource-kubernetes" . "$LDBASE $x" "$PULUMI_K8S_MOD@$PULUMI_K8S_MODULE_VERSION (pulumi-kubernetes $PULUMI_K8S_VERSION)" ;;
    kwok)
      check_pin "$fam" "$src" "$KWOK_MOD" "$KWOK_VERSION" || return 1
      go_build "$fam" "$src" "$out/kwok" "$KWOK_MOD/cmd/kwok" "$LDBASE $x" "$KWOK_MOD@$KWOK_VERSION" ;;
    actionlint)
      check_pin "$fam" "$src" "$ACTIONLINT_MOD" "$ACTIONLINT_VERSION" || return 1
      go_build "$fam" "$src" "$out/actionlint" "$ACTIONLINT_MOD/cmd/actionlint" "$LDBASE $x" "$ACTIONLINT_MOD@$ACTIONLINT_VERSION" ;;
    kube-score)
      check_pin "$fam" "$src" "$KUBE_SCORE_MOD" "$KUBE_SCORE_VERSION" || return 1
      go_build "$fam" "$src" "$out/kube-score" "$KUBE_SCORE_MOD/cmd/kube-score" "$LDBASE $x" "$KUBE_SCORE_MOD@$KUBE_SCORE_VERSION" ;;
    infercrane-node)
      check_pin "$fam" "$src" "$KUBELET_MOD" "$KUBELET_VERSION" || return 1
      # The images built from these binaries have committed digests: same compiler, same
      # microarchitecture level on every machine, whatever the caller's environment says.
      (
        export GOTOOLCHAIN=$NODE_GO_TOOLCHAIN GOAMD64=v1
        for b in $(family_outputs "$fam"); do
          go_build "$fam" "$src" "$out/$b" "./cmd/$b" "$LDBASE $x" "hack/tools/infercrane-node $INFERCRANE_NODE_VERSION ($NODE_GO_TOOLCHAIN)" || exit 1
        done
      ) ;;
    containerd)
      check_pin "$fam" "$src" "$CONTAINERD_MOD" "$CONTAINERD_VERSION" || return 1
      for cmd in containerd containerd-shim-runc-v2 ctr; do
        go_build "$fam" "$src" "$out/$cmd" "$CONTAINERD_MOD/cmd/$cmd" "$LDBASE $x" \
          "$CONTAINERD_MOD@$CONTAINERD_VERSION" "$CONTAINERD_TAGS" || return 1
      done ;;
    cni-plugins)
      check_pin "$fam" "$src" "$CNI_PLUGINS_MOD" "$CNI_PLUGINS_VERSION" || return 1
      for plugin in "${CNI_PLUGINS[@]}"; do
        go_build "$fam" "$src" "$out/${plugin##*/}" "$CNI_PLUGINS_MOD/plugins/$plugin" "$LDBASE $x" \
          "$CNI_PLUGINS_MOD@$CNI_PLUGINS_VERSION" || return 1
      done ;;
    versitygw)
      check_pin "$fam" "$src" "$VERSITYGW_MOD" "$VERSITYGW_VERSION" || return 1
      go_build "$fam" "$src" "$out/versitygw" "$VERSITYGW_MOD/cmd/versitygw" "$LDBASE $x" "$VERSITYGW_MOD@$VERSITYGW_VERSION" ;;
    kserve)
      check_pin "$fam" "$src" "$KSERVE_MOD" "$KSERVE_VERSION" || return 1
      go_build "$fam" "$src" "$out/kserve-manager" "$KSERVE_MOD/cmd/manager" "$LDBASE $x" "$KSERVE_MOD@$KSERVE_VERSION" || return 1
      copy_kserve_config "$src" "$out/kserve" || return 1
      echo "[$fam] copied $(find "$out/kserve" -type f | wc -l) YAML files from $KSERVE_MOD@$KSERVE_VERSION into kserve/" ;;
    kind)
      # Not stamped: kind's version is a constant of its source (`kind version`: kind v0.33.0).
      check_pin "$fam" "$src" "$KIND_MOD" "$KIND_VERSION" || return 1
      go_build "$fam" "$src" "$out/kind" "$KIND_MOD" "$LDBASE $x" "$KIND_MOD@$KIND_VERSION" || return 1
      copy_kind_files "$src" "$out/kind-node" || return 1
      echo "[$fam] copied ${#KIND_NODE_FILES[@]} node image files from $KIND_MOD@$KIND_VERSION into kind-node/" ;;
    coredns)
      # Not stamped: CoreVersion is a constant; GitCommit would need a commit the proxy does not give.
      check_pin "$fam" "$src" "$COREDNS_MOD" "$COREDNS_VERSION" || return 1
      go_build "$fam" "$src" "$out/coredns" "$COREDNS_MOD" "$LDBASE $x" "$COREDNS_MOD@$COREDNS_VERSION" ;;
  esac
}

is_optional() { [[ " ${INFERCRANE_TOOLS_OPTIONAL-} " == *" $1 "* ]]; }

family_complete() {
  local b from to
  for b in $(family_outputs "$1"); do [[ -x $2/$b ]] || return 1; done
  for b in $(family_data "$1"); do [[ -f $2/$b ]] || return 1; done
  # Only in the bin dir (a store dir holds the family's own outputs).
  [[ $2 == "$BIN_DIR" ]] || return 0
  while read -r from to; do [[ -x $2/$to ]] || return 1; done < <(family_links "$1")
}

# link_family_links <family>: its family_links, or an error naming a missing one.
link_family_links() {
  local from to
  while read -r from to; do
    [[ -x $BIN_DIR/$from ]] || { echo "build.sh: ERROR [$1]: $from is not in $BIN_DIR: build its family first" >&2; return 1; }
    ln -f "$BIN_DIR/$from" "$BIN_DIR/$to" 2>/dev/null || cp -f "$BIN_DIR/$from" "$BIN_DIR/$to"
  done < <(family_links "$1")
}

T_START=$(now)
FAILED=()
echo "tools cache: $CACHE_ROOT"
all_complete() {
  local fam
  for fam in "${SELECTED[@]}"; do family_complete "$fam" "$1" || return 1; done
}
if all_complete "$BIN_DIR"; then
  echo "bin dir up to date: $BIN_DIR (${SELECTED[*]})"
else
  lock_cache
  mkdir -p "$BIN_DIR"
  for fam in "${SELECTED[@]}"; do
    if family_complete "$fam" "$BIN_DIR"; then
      continue
    fi
    fdir="$STORE/$fam-$(family_key "$fam")"
    if family_complete "$fam" "$fdir"; then
      echo "[$fam] reusing $fdir"
    else
      echo "[$fam] building $(family_pins "$fam") -> $fdir"
      : >"$LOG_DIR/$fam.log"
      tmp="$fdir.tmp.$$"
      rm -rf "$tmp"; mkdir -p "$tmp/src" "$tmp/out"
      from=$(family_dir "$fam")
      cp "$from"/go.mod "$tmp/src/"
      cp "$from"/go.sum "$from"/*.go "$tmp/src/" 2>/dev/null || true
      copy_nested_go_files "$fam" "$tmp/src"
      t0=$(now)
      if build_family "$fam" "$tmp/out" "$tmp/src"; then
        rm -rf "$fdir"; mv "$tmp/out" "$fdir"; rm -rf "$tmp"
        echo "[$fam] done in $(( $(now) - t0 ))s"
      else
        rm -rf "$tmp"
        FAILED+=("$fam")
        echo "[$fam] FAILED after $(( $(now) - t0 ))s (log: $LOG_DIR/$fam.log)"
        continue
      fi
    fi
    for b in $(family_outputs "$fam") $(family_data "$fam"); do
      mkdir -p "$(dirname "$BIN_DIR/$b")"
      ln -f "$fdir/$b" "$BIN_DIR/$b" 2>/dev/null || cp -f "$fdir/$b" "$BIN_DIR/$b"
    done
    link_family_links "$fam" || FAILED+=("$fam")
  done
fi

# Install the kubernetes plugin into PULUMI_HOME (every run; a no-op when already current).
if [[ -x $BIN_DIR/pulumi && -x $BIN_DIR/pulumi-resource-kubernetes ]]; then
  export PULUMI_HOME=${PULUMI_HOME:-$REPO_ROOT/.infercrane/pulumi-home}
  export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true PULUMI_SKIP_UPDATE_CHECK=true
  mkdir -p "$PULUMI_HOME"
  t0=$(now)
  installed="$PULUMI_HOME/plugins/resource-kubernetes-v$PULUMI_K8S_VERSION/pulumi-resource-kubernetes"
  if [[ -x $installed ]] && cmp -s "$installed" "$BIN_DIR/pulumi-resource-kubernetes" \
     && [[ ! -e $PULUMI_HOME/plugins/resource-kubernetes-v$PULUMI_K8S_VERSION.partial ]]; then
    echo "[plugin] kubernetes $PULUMI_K8S_VERSION already installed in $PULUMI_HOME"
  else
    lock_cache
    reinstall=()
    [[ -e $installed ]] && reinstall=(--reinstall)
    echo "[plugin] installing resource kubernetes $PULUMI_K8S_VERSION into $PULUMI_HOME"
    if ! "$BIN_DIR/pulumi" plugin install resource kubernetes "$PULUMI_K8S_VERSION" --exact \
        "${reinstall[@]}" --file "$BIN_DIR/pulumi-resource-kubernetes" >"$LOG_DIR/plugin-install.log" 2>&1; then
      cat "$LOG_DIR/plugin-install.log" >&2
      FAILED+=(plugin-install)
    else
      echo "[plugin] installed in $(( $(now) - t0 ))s"
    fi
  fi
fi

HARD_FAIL=()
for fam in "${FAILED[@]}"; do
  if is_optional "$fam"; then
    log "WARNING: $fam failed (listed in INFERCRANE_TOOLS_OPTIONAL); its binaries are missing from $BIN_DIR"
  else
    HARD_FAIL+=("$fam")
  fi
done
echo "total $(( $(now) - T_START ))s"
if (( ${#HARD_FAIL[@]} )); then
  die "failed: ${HARD_FAIL[*]} (see messages above; logs in $LOG_DIR)"
fi
echo "bin: $BIN_DIR"

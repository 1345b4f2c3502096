#!/usr/bin/env bash
# `make test`, in the order that hides the slowest builds and the Kind tests' waiting: every tool
# family but KServe's, Kind's and the newest Pulumi CLI's is built first (the Makefile's
# prerequisite). Then, in the background: Kind's tools with what its cluster is made of
# (`python -m infercrane_dev.kind prepare`: the runner image, PostgreSQL's, the node image's
# parts), niced; KServe's family (802 s of CPU cold) and the newest Pulumi CLI (75 s of CPU on
# the Go build cache the other families leave, 391 s from an empty one), niced further, as they
# are needed last. Meanwhile lint, the Go tests and the real node's scenarios (marked real_node)
# run in the foreground; they must finish before a Kind cluster starts, as both take the
# machine's one real-node lock. Then the rest of the suite (every test not marked real_node,
# kserve_controller, kind or newest_cli; much of it waiting on API servers and Pods) runs in the
# background, and the Kind tests beside it as soon as Kind's parts are ready (their runner
# scenarios about 70 s, the node restarts about 150 s, the token's two rotations about 16 min
# from the module's start, the other scenarios running meanwhile: about 21 min, mostly waiting).
# When the Kind tests end (the main suite takes about 34 min beside them), the tests that run
# KServe's controller (161 s; they share the real-node lock too), the wheel on every supported
# Python (infercrane_dev/pythons.py) and the engine-contract cases on the newest CLI run, still
# beside the main suite. PYTEST_ARGS (a selection) runs one pytest after the builds instead.
# Either way a failed build or test job fails the run, with its log.
# docs/explanation/performance.md has what a cold .ci/run took.
set -euo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
bin=$(hack/tools/build.sh --bin-dir)
export INFERCRANE_TOOLS_BIN=$bin
mkdir -p .infercrane
started=$(date +%s)
declare -A background=()

# start_job <name> <niceness> <command...>: in the background, niced, in its own process group
# (so that an interrupted run stops its go processes too), output to .infercrane/<name>.log.
start_job() {
  local name=$1 niceness=$2
  shift 2
  setsid nice -n "$niceness" "$@" >".infercrane/$name.log" 2>&1 &
  background[$name]=$!
}
# start_tests <name> <pytest args...>: a pytest in the background at normal priority (its
# scenarios wait on deadlines), in its own process group, output to .infercrane/<name>.log.
# SIGINT's default handling given back: a non-interactive shell starts a background command
# with SIGINT ignored, and Python then keeps ignoring it, so `stop_background`'s interrupt was
# lost and its kill two minutes later left Kind's bridge and Service route on the host, which
# failed the next run's real-node tests (seen after stop 57's CI).
declare -A interruptible=()
start_tests() {
  local name=$1
  shift
  setsid env --default-signal=INT .venv/bin/python -m pytest -rs -p no:cacheprovider "$@" \
    >".infercrane/$name.log" 2>&1 &
  background[$name]=$!
  interruptible[$name]=1
}
# A pytest is interrupted (SIGINT), so that its fixtures tear down what they started (Kind's
# Docker daemon and cluster), and given two minutes; what is left is stopped.
stop_background() {
  local name pid
  for name in "${!background[@]}"; do
    pid=${background[$name]}
    if [[ -n ${interruptible[$name]-} ]]; then
      kill -INT "$pid" 2>/dev/null || true
      for _ in {1..120}; do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
    kill -- "-$pid" 2>/dev/null || true
  done
}
trap stop_background EXIT

# wait_job <name> <what>: wait for it; a failure fails the run, with its log (a test job's
# whole log, whatever its end).
wait_job() {
  local name=$1 what=$2 rc=0
  wait "${background[$name]}" || rc=$?
  unset "background[$name]"
  if [[ -n ${interruptible[$name]-} ]]; then
    cat ".infercrane/$name.log"
  elif ((rc != 0)); then
    tail -n 30 ".infercrane/$name.log" >&2
  fi
  if ((rc != 0)); then
    echo "test.sh: $what failed (full log: .infercrane/$name.log)" >&2
    exit 1
  fi
  echo "test.sh: $what ready $(($(date +%s) - started))s after make test started it"
}

start_job kserve-build 19 hack/tools/build.sh --only kserve
start_job pulumi-newest-build 19 hack/tools/build.sh --only pulumi-newest
# Kind's tools, then what its cluster is made of (the Debian base by debootstrap in a mount
# namespace of its own, the Kubernetes and stand-in images); neither Docker nor the machine's
# real-node lock, so the real node's scenarios run meanwhile. Where Kind cannot run (prepare
# exits 2 saying why), the Kind test says so itself: skipped, or failed under
# INFERCRANE_REQUIRE_TOOLS=1.
start_job kind-prepare 10 bash -c 'hack/tools/build.sh --only kind,coredns &&
  { .venv/bin/python -m infercrane_dev.kind prepare || (($? == 2)); }'

# Every scenario runs where a control plane runs: in a process with a KUBECONFIG of its own
# exported. Here it is a decoy whose contexts have the names the suite's kubeconfigs use and
# reach nothing (issue 39): no run may use it (tests/conformance/test_ambient_kubeconfig.py says
# which may not); tests/conftest.py adds the provider's variables a run must not take either.
decoy=$PWD/.infercrane/decoy-kubeconfig
cat >"$decoy" <<'EOF'
apiVersion: v1
kind: Config
clusters:
- name: decoy
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: decoy
  user: {token: decoy}
contexts:
- {name: infercrane-admin, context: {cluster: decoy, user: decoy}}
- {name: infercrane-provider, context: {cluster: decoy, user: decoy}}
- {name: infercrane-conformance-provider, context: {cluster: decoy, user: decoy}}
current-context: infercrane-admin
EOF
export KUBECONFIG=$decoy

"$make" --no-print-directory lint
hack/tools/build.sh --test
py=.venv/bin/python
if [[ -n ${PYTEST_ARGS-} ]]; then
  wait_job kserve-build "the KServe family's build"
  wait_job pulumi-newest-build "the newest Pulumi CLI's build"
  wait_job kind-prepare "Kind's tools and images"
  # shellcheck disable=SC2086  # PYTEST_ARGS is a word list by design, as in the Makefile
  "$py" -m pytest -rs $PYTEST_ARGS
  exit 0
fi
# The real node's scenarios first: they and a Kind cluster take the machine's one real-node lock.
"$py" -m pytest -rs --durations=10 -m "real_node and not kserve_controller"
# The rest of the suite, and the Kind tests beside it as soon as what their cluster is made of is
# ready: the token's rotations keep the Kind tests waiting for most of their 21 minutes.
start_tests main-tests --durations=30 -m "not real_node and not kserve_controller and not kind and not newest_cli"
wait_job kind-prepare "Kind's tools and images"
start_tests kind-tests --durations=20 -m kind
# Once the Kind cluster is gone, the real-node lock is free again: KServe's controller scenarios,
# the wheel on Python 3.11, 3.12 and 3.13 (lowest dependencies) and the newest CLI's cases run
# beside the rest of the main suite, which outlasts the Kind tests.
wait_job kind-tests "the Kind tests"
wait_job kserve-build "the KServe family's build"
"$py" -m pytest -rs -m kserve_controller
"$py" -m infercrane_dev.pythons
wait_job pulumi-newest-build "the newest Pulumi CLI's build"
"$py" -m pytest -rs -m newest_cli
wait_job main-tests "the main suite"

#!/usr/bin/env bash
# `make test`, in the order that hides the slowest build: every tool family but KServe's is
# built first (the Makefile's prerequisite); KServe's (802 s of CPU cold; 381 s beside the rest
# in a cold .ci/run on a fresh VM) then builds in the background, niced, while lint, the Go
# tests, every test not marked kserve_controller (1290 s there; much of it waiting on API
# servers and Pods) and the wheel on every supported Python (infercrane_dev/pythons.py, 293 s
# with a warm pip cache) run; the tests that run KServe's controller (161 s) run last, once it
# is built. PYTEST_ARGS (a selection) runs one pytest after the build instead. Either way a
# failed build fails the run, with its log.
set -euo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
bin=$(hack/tools/build.sh --bin-dir)
export INFERCRANE_TOOLS_BIN=$bin
mkdir -p .infercrane
log=.infercrane/kserve-build.log
started=$(date +%s)
# Its own process group, so that an interrupted run stops the build's go processes too.
setsid nice -n 10 hack/tools/build.sh --only kserve >"$log" 2>&1 &
build=$!
trap 'kill -- "-$build" 2>/dev/null || true' EXIT

wait_for_kserve() {
  local rc=0
  wait "$build" || rc=$?
  trap - EXIT
  if ((rc != 0)); then
    tail -n 30 "$log" >&2
    echo "test.sh: the KServe family's build failed (full log: $log)" >&2
    exit 1
  fi
  echo "test.sh: KServe family ready $(($(date +%s) - started))s after make test started it"
}

"$make" --no-print-directory lint
hack/tools/build.sh --test
py=.venv/bin/python
if [[ -n ${PYTEST_ARGS-} ]]; then
  wait_for_kserve
  # shellcheck disable=SC2086  # PYTEST_ARGS is a word list by design, as in the Makefile
  "$py" -m pytest -rs $PYTEST_ARGS
  exit 0
fi
"$py" -m pytest -rs -m "not kserve_controller"
# The built wheel on Python 3.11, 3.12 and 3.13 (lowest dependencies).
"$py" -m infercrane_dev.pythons
wait_for_kserve
"$py" -m pytest -rs -m kserve_controller

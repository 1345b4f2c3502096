#!/usr/bin/env bash
# `make test`, in the order that hides the slowest build: every tool family but KServe's is
# built first (the Makefile's prerequisite); KServe's (802 s of CPU cold, 428 s beside the rest in one cold run) then
# builds in the background, niced, while lint, the Go tests and every test not marked
# kserve_controller run (much of their time is spent waiting on API servers and Pods); the
# tests that run KServe's controller run last, once it is built. PYTEST_ARGS (a selection) runs one pytest after the
# build instead. Either way a failed build fails the run, with its log.
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
# Python 3.12 and 3.13 (lowest dependencies) on the built wheel (infercrane_dev/pythons.py).
"$py" -m infercrane_dev.pythons
wait_for_kserve
"$py" -m pytest -rs -m kserve_controller

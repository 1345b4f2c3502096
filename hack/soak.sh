#!/usr/bin/env bash
# `make soak`: the property tests (tests/conformance/faults/: the deletion rule, and the desired
# state's versions between two runners; killed `pulumi up`s of a component package program)
# on random sequences for at least SOAK_MINUTES, in
# batches of about SOAK_BATCH_MINUTES, each property about half of a batch. One
# hypothesis run draws a fixed number of sequences (it has no time bound, and one cut short
# replays its choices differently: FlakyStrategyDefinition), sized from a pace measured on a
# quiet machine, so a faster run ends early; batches, each its own seed (the first is printed,
# then each next is one more), run until the time is up. A failure stops the soak and names its
# batch's seed: SEED=<n> SOAK_MINUTES=<batch minutes> draws that batch again.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${SOAK_MINUTES:-60}
batch_minutes=${SOAK_BATCH_MINUTES:-15}
seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
started=$(date +%s)
end=$((started + minutes * 60))
echo "soak: seed $seed, at least $minutes minutes in batches of about $batch_minutes (SEED=$seed draws the same batches)"
batch=0
while [ "$(date +%s)" -lt "$end" ]; do
  batch=$((batch + 1))
  echo "soak batch $batch: seed $seed, $(( ($(date +%s) - started) / 60 )) min in"
  # PYTEST_ARGS is several words, split as make's other targets split it.
  # shellcheck disable=SC2086
  if ! INFERCRANE_SOAK_MINUTES=$(( (batch_minutes + 1) / 2 )) INFERCRANE_SOAK_SEED="$seed" \
      "${PY:-.venv/bin/python}" -m pytest -rs \
      -p no:cacheprovider --hypothesis-seed="$seed" tests/conformance/faults/test_deletion_rule.py \
      tests/conformance/faults/test_desired_versions.py \
      tests/conformance/test_component_package.py::test_killed_ups_leave_nothing_the_next_up_does_not_reconcile \
      ${PYTEST_ARGS:-}; then
    echo "soak: batch $batch failed; SEED=$seed SOAK_MINUTES=$batch_minutes SOAK_BATCH_MINUTES=$batch_minutes draws it again"
    exit 1
  fi
  seed=$((seed + 1))
done
echo "soak: $batch batches passed in $(( ($(date +%s) - started) / 60 )) min"

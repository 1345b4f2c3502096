"""The floor: what the same work costs with nothing but one persistent API client.

The least any implementation of the contract must do per object, as the provider identity:
validate the intents, render the objects (``workloads.stack_objects``), then a strict
server-side dry-run and an apply under the field manager ``infercrane-provider-v1``, never
forced. A no-op is the same dry-run and apply again; a preview is the dry-run alone; a delete is
one DELETE per object (Background, as ours) and waiting until every object is gone. The
ownership reads and the refresh that ours adds are deliberately not part of the floor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from benchmarks import scenario
from benchmarks.progress import Progress
from benchmarks.sampling import Usage
from benchmarks.workbench import Workbench
from infercrane_pulumi.cluster.api import (
    APPLY_CONTENT_TYPE,
    Cluster,
    Response,
    object_subject,
    raise_for_status,
)
from infercrane_pulumi.cluster.preflight import dry_run_refusal
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import kinds, naming, workloads
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.workloads import KINDS

GONE_POLL_SECONDS = 0.1


def objects(settings: KubernetesSettings, desired: Sequence[ReplicaIntent]) -> list[Manifest]:
    return workloads.stack_objects(scenario.stack_config(settings, desired))


def dry_run(cluster: Cluster, obj: Manifest) -> Response:
    response = cluster.dry_run_apply(obj)
    refusal = dry_run_refusal([obj], [response])
    if refusal is not None:
        raise refusal
    return response


def apply(cluster: Cluster, obj: Manifest) -> Response:
    meta = obj["metadata"]
    response = cluster.transport.request(
        "PATCH",
        KINDS[obj["kind"]].path(meta["namespace"], meta["name"]),
        query=[("fieldManager", naming.FIELD_MANAGER), ("force", "false")],
        body=obj,
        content_type=APPLY_CONTENT_TYPE,
    )
    raise_for_status(response, object_subject(obj))
    return response


def _version(response: Response) -> str:
    return str((response.body.get("metadata") or {}).get("resourceVersion") or "")


def apply_all(
    cluster: Cluster, settings: KubernetesSettings, desired: Sequence[ReplicaIntent]
) -> int:
    """Dry-run then apply each object; returns how many the apply wrote (its resourceVersion
    differs from the one the dry-run saw a moment before)."""
    written = 0
    for obj in objects(settings, desired):
        before = _version(dry_run(cluster, obj))
        written += _version(apply(cluster, obj)) != before
    return written


def dry_run_all(
    cluster: Cluster, settings: KubernetesSettings, desired: Sequence[ReplicaIntent]
) -> None:
    for obj in objects(settings, desired):
        dry_run(cluster, obj)


def delete(cluster: Cluster, obj: Manifest) -> None:
    """One DELETE (Background, as ours); an object already gone is fine."""
    meta = obj["metadata"]
    response = cluster.transport.request(
        "DELETE",
        KINDS[obj["kind"]].path(meta["namespace"], meta["name"]),
        query=[("propagationPolicy", "Background")],
    )
    if response.status != 404:
        raise_for_status(response, object_subject(obj))


def delete_all(
    cluster: Cluster, settings: KubernetesSettings, desired: Sequence[ReplicaIntent]
) -> None:
    namespace = settings.namespace
    for obj in objects(settings, desired):
        delete(cluster, obj)
    owned = (kinds.DEPLOYMENT, kinds.SERVICE)
    while any(cluster.select(kind, namespace, naming.OWNED_SELECTOR) for kind in owned):
        time.sleep(GONE_POLL_SECONDS)


def lifecycle(bench: Workbench, progress: Progress, n: int, rep: int) -> dict[str, Usage]:
    """One repetition at N with one client kept across the steps, as a controller would."""
    settings = bench.namespace(f"bench-{n}-floor")
    desired = scenario.intents(n)
    extra = [scenario.extra_intent(n)]
    grown = [*desired, *extra]
    # How many objects each step writes.
    writes = {"up": 2 * n, "noop": 0, "add1": 2}
    usages: dict[str, Usage] = {}
    with bench.provider_cluster() as cluster:
        steps: dict[str, Callable[[], object]] = {
            "up": lambda: apply_all(cluster, settings, desired),
            "noop": lambda: apply_all(cluster, settings, desired),
            "add1": lambda: apply_all(cluster, settings, extra),
            "preview": lambda: dry_run_all(cluster, settings, scenario.with_one_changed(grown)),
            "destroy": lambda: delete_all(cluster, settings, grown),
        }
        for key, call in steps.items():
            label = f"N={n} rep {rep} floor {scenario.OPERATIONS[key]}"
            written, usages[key] = progress.measure(label, call)
            if key in writes and written != writes[key]:
                # Not fatal: a controller's status write between dry-run and apply looks the
                # same, and the numbers stay valid; it is worth seeing, not worth a lost run.
                progress.say(f"  warning: {label} wrote {written} objects, expected {writes[key]}")
            bench.settle(settings.namespace, scenario.pods_after(key, n), progress.say)
    return usages

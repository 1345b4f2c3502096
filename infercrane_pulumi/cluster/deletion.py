"""Deleting a stack's objects: all at once, each only if it is still the object the ownership
check approved, then one LIST per kind of theirs until they are gone.

The engine never deletes an object of ours: every object is registered with Pulumi's
``retainOnDelete``, because the engine deletes by name and a DELETE by name can take a
look-alike created after any check. Whoever runs the program deletes instead, here: the run
path (a destroy before the engine runs, an up once the engine has forgotten the objects), and
the program itself, before it registers anything, when a person runs ``pulumi up``; the engine
only forgets. Each DELETE carries the uid the ownership check just read as a precondition (an
object replaced since is never deleted: the API server answers 409), with the Background
propagation the objects ask for. Which objects is the run's verdict's to say
(``actions.Verdict.doomed``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from infercrane_pulumi.cluster.actions import Doomed
from infercrane_pulumi.cluster.api import Cluster, failure, object_subject
from infercrane_pulumi.cluster.preflight import DRY_RUN_CONCURRENCY, Snapshot
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.errors import ClusterUnavailableError, OwnershipError
from infercrane_pulumi.objects.workloads import KINDS

GONE_POLL_SECONDS = 0.2
GONE_TIMEOUT_SECONDS = 120.0


def _remaining(objects: Sequence[Doomed], live: Snapshot) -> bool:
    """Whether any of the deleted objects is still there (by uid: a new object at the name
    is someone else's)."""
    return any(
        (live.get(obj["kind"], {}).get(obj["metadata"]["name"]) or {}).get("uid") == uid
        for obj, uid in objects
    )


def delete_all(cluster: Cluster, settings: KubernetesSettings, objects: Sequence[Doomed]) -> None:
    """Delete each object if it still has its uid, then wait until none of them is left."""
    if not objects:
        return
    with ThreadPoolExecutor(max_workers=DRY_RUN_CONCURRENCY) as pool:
        answers = list(pool.map(lambda item: cluster.delete(item[0], uid=item[1]), objects))
    replaced = []
    for (obj, _), answer in zip(objects, answers, strict=True):
        if answer.status == 409:
            replaced.append(
                f"{object_subject(obj)}: replaced since its ownership was checked; InferCrane "
                "never deletes an object that is not exactly its own"
            )
        elif answer.status != 404 and (error := failure(answer, f"{object_subject(obj)}: delete")):
            raise error
    if replaced:
        raise OwnershipError(replaced)
    deadline = time.monotonic() + GONE_TIMEOUT_SECONDS
    kinds = {KINDS[obj["kind"]] for obj, _ in objects}
    while _remaining(objects, {k.kind: cluster.metadata(k, settings.namespace) for k in kinds}):
        if time.monotonic() > deadline:
            raise ClusterUnavailableError(
                f"namespace {settings.namespace}: deleted objects still present after "
                f"{GONE_TIMEOUT_SECONDS:.0f}s; try again"
            )
        time.sleep(GONE_POLL_SECONDS)

"""Deleting a stack's objects for a destroy: all at once, each only if it is still the object
the ownership check approved, then one LIST per kind until they are gone.

pulumi-kubernetes deletes object by object and watches each until it is gone (its skipAwait
does not cover deletions). So the run path deletes them itself before the engine's destroy,
concurrently, each DELETE carrying the uid the ownership check just read as a precondition (an
object replaced since is never deleted: the API server answers 409), with the Background
propagation the objects ask for; the engine then finds them gone and only forgets them.
``doomed`` is pure; ``delete_all`` is the I/O.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from infercrane_pulumi.cluster.client import Cluster, failure, object_subject
from infercrane_pulumi.cluster.preflight import DRY_RUN_CONCURRENCY, Snapshot, snapshot
from infercrane_pulumi.errors import ClusterUnavailableError, OwnershipError
from infercrane_pulumi.intents import KubernetesSettings
from infercrane_pulumi.manifests import Manifest

Doomed = tuple[Manifest, str]  # an object, and the uid it must still have
GONE_POLL_SECONDS = 0.2
GONE_TIMEOUT_SECONDS = 120.0


def doomed(objects: Sequence[Manifest], live: Snapshot) -> list[Doomed]:
    """The objects that exist, each with the uid ``live`` shows."""
    found = []
    for obj in objects:
        meta = live[obj["kind"]].get(obj["metadata"]["name"])
        if meta is not None:
            found.append((obj, str(meta.get("uid"))))
    return found


def delete_all(cluster: Cluster, settings: KubernetesSettings, objects: Sequence[Doomed]) -> None:
    """Delete each object if it still has its uid, then wait until none of them is left."""
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
    while doomed([obj for obj, _ in objects], snapshot(cluster, settings)):
        if time.monotonic() > deadline:
            raise ClusterUnavailableError(
                f"namespace {settings.namespace}: deleted objects still present after "
                f"{GONE_TIMEOUT_SECONDS:.0f}s; try again"
            )
        time.sleep(GONE_POLL_SECONDS)

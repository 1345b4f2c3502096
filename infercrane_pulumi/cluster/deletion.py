"""Deleting a stack's objects: all at once, each only if it is still the object the ownership
check approved, then one LIST per kind until they are gone.

The engine never deletes an object of ours: every object is registered with Pulumi's
``retainOnDelete``, because the engine deletes by name and a DELETE by name can take a
look-alike created after any check. Whoever runs the program deletes instead, here: the run
path before the engine, the program itself when a person runs ``pulumi up``; the engine then
only forgets. Each DELETE carries the uid the ownership check just read as a precondition (an
object replaced since is never deleted: the API server answers 409), with the Background
propagation the objects ask for. ``leftovers`` (which objects) is pure; ``delete_all`` is the
I/O.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

from infercrane_pulumi import naming
from infercrane_pulumi.cluster.client import Cluster, failure, object_subject
from infercrane_pulumi.cluster.preflight import DRY_RUN_CONCURRENCY, Snapshot, snapshot
from infercrane_pulumi.errors import ClusterUnavailableError, OwnershipError
from infercrane_pulumi.intents import KubernetesSettings
from infercrane_pulumi.kinds import KINDS
from infercrane_pulumi.manifests import Manifest

Doomed = tuple[Manifest, str]  # an object, and the uid it must still have
GONE_POLL_SECONDS = 0.2
GONE_TIMEOUT_SECONDS = 120.0


def leftovers(
    live: Snapshot,
    *,
    namespace: str,
    stack: str,
    kept: Collection[str],
    recorded: Collection[str] = (),
) -> list[Doomed]:
    """The objects of this stack that no kept key holds, each with the uid ``live`` shows:
    exactly ours by every ownership mark, their key not in ``kept``, and either carrying this
    stack's identity (a run that died created them, or a removed key applied them) or,
    applied before objects carried one, their key ``recorded`` in this stack's state. An
    object of another stack, or not exactly ours, is never one."""
    found = []
    for kind, objects in sorted(live.items()):
        for name, meta in sorted(objects.items()):
            key = naming.owner_key(meta, namespace)
            if key is None or key in kept:
                continue
            marked = (meta.get("labels") or {}).get(naming.LABEL_STACK)
            if marked == stack or (marked is None and key in recorded):
                # The key rides along so that a run can report what it deleted.
                obj: Manifest = {
                    "apiVersion": KINDS[kind].group_version,
                    "kind": kind,
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "annotations": {naming.ANNOTATION_EXTERNAL_KEY: key},
                    },
                }
                found.append((obj, str(meta.get("uid"))))
    return found


def _remaining(objects: Sequence[Doomed], live: Snapshot) -> bool:
    """Whether any of the deleted objects is still there (by uid: a new object at the name
    is someone else's)."""
    return any(
        (live[obj["kind"]].get(obj["metadata"]["name"]) or {}).get("uid") == uid
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
    while _remaining(objects, snapshot(cluster, settings)):
        if time.monotonic() > deadline:
            raise ClusterUnavailableError(
                f"namespace {settings.namespace}: deleted objects still present after "
                f"{GONE_TIMEOUT_SECONDS:.0f}s; try again"
            )
        time.sleep(GONE_POLL_SECONDS)

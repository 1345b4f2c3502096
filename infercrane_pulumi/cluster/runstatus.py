"""The runner's results where Kubernetes users look: a status ConfigMap beside the stack file.

After each run, ``up --status-configmap NAME`` writes what the run did to ConfigMap ``NAME`` of
the stack's namespace, by server-side apply under the provider's field manager, never forced,
so a control plane in any language reads it with a GET or a watch, and a person with
``kubectl get``, instead of parsing a log. Its ``data``, all strings:

- ``result``: ``applied`` or ``failed``, of the last run; ``finishedAt``: when it ended.
- ``appliedVersion``: the ``resourceVersion`` of the stack ConfigMap the last successful run
  applied (``up --configmap``; empty for a stack file read from disk), ``appliedAt``, and
  ``replicas``: that run's keys, each with its change and reasons (JSON). A failed run keeps
  them: they stay what the cluster holds. The latest desired state is applied when
  ``appliedVersion`` equals the stack ConfigMap's ``metadata.resourceVersion``.
- ``error``, ``retryable``, ``problems``: the last run's error (its code, whether the same run
  may succeed later, one problem per line); empty after a successful run.

An object at that name that is not this stack's status (its labels and annotation) is never
changed: ``OwnershipError``, as for a replica's objects. The shipped runner's Role may only
``get`` and ``patch`` it, by name (RBAC cannot limit ``create`` to a name), so the runner's
Kustomize base holds the object, empty; an identity that may create ConfigMaps creates it on
its first write. Nothing here decides a run's outcome: the status reports the run, it does not
gate it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from infercrane_pulumi.cluster.api import Cluster, failure, subject
from infercrane_pulumi.errors import ClusterForbiddenError, OwnershipError
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.kinds import CONFIG_MAP
from infercrane_pulumi.objects.manifests import Manifest

NAME_LABEL = "infercrane-stack-status"  # app.kubernetes.io/name of every status object
ANNOTATION_STACK = "infercrane.dev/stack"
LABELS = {naming.LABEL_NAME: NAME_LABEL, naming.LABEL_MANAGED_BY: naming.MANAGED_BY}
APPLIED_KEYS = ("appliedVersion", "appliedAt", "replicas")  # a failed run keeps these


def status_data(
    envelope: Mapping[str, Any], *, finished_at: str, previous: Mapping[str, str]
) -> dict[str, str]:
    """The status of the run whose ``--json`` envelope is ``envelope``; ``previous``: the data
    the status held before (what a failed run keeps)."""
    error = envelope.get("error")
    if error is None:
        result = envelope["result"]
        version = result.get("desiredVersion") or {}
        replicas = [
            {"externalKey": r["externalKey"], "change": r["change"], "reasons": r["reasons"]}
            for r in result["replicas"]
        ]
        applied = {
            "appliedVersion": str(version.get("resourceVersion", "")),
            "appliedAt": finished_at,
            "replicas": json.dumps(replicas, sort_keys=True),
        }
        outcome = {"result": "applied", "error": "", "retryable": "", "problems": ""}
    else:
        applied = {key: previous.get(key, "") for key in APPLIED_KEYS}
        outcome = {
            "result": "failed",
            "error": str(error["code"]),
            "retryable": json.dumps(bool(error["retryable"])),
            "problems": "\n".join(error["problems"]),
        }
    return applied | outcome | {"finishedAt": finished_at}


def status_object(namespace: str, name: str, stack: str, data: Mapping[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": CONFIG_MAP.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(LABELS),
            "annotations": {ANNOTATION_STACK: stack},
        },
        "data": dict(data),
    }


def is_status_of(found: Mapping[str, Any], stack: str) -> bool:
    """Whether ``found`` is the status object of ``stack`` (a look-alike is not)."""
    meta = found.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return all(labels.get(k) == v for k, v in LABELS.items()) and (
        annotations.get(ANNOTATION_STACK) == stack
    )


def publish(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    stack: str,
    envelope: Mapping[str, Any],
    finished_at: str,
) -> None:
    """Write the status of one run of ``stack`` (its ``--json`` envelope) to ConfigMap
    ``name``; raise the typed error when it cannot be written."""
    where = subject(CONFIG_MAP.kind, namespace, name)
    found = cluster.get(CONFIG_MAP, namespace, name)
    if found is not None and not is_status_of(found, stack):
        raise OwnershipError(
            f"{where}: exists and is not the run status of stack {stack}; left unchanged"
        )
    previous = (found or {}).get("data") or {}
    data = status_data(envelope, finished_at=finished_at, previous=previous)
    response = cluster.apply(CONFIG_MAP, status_object(namespace, name, stack, data))
    if response.status == 409:  # another manager owns one of its fields: never forced
        raise OwnershipError(f"{where}: another field manager owns its fields; left unchanged")
    if response.status == 403 and found is None:  # the shipped Role may not create it
        raise ClusterForbiddenError(
            f"{where}: not found, and this identity may only patch it: apply the runner's "
            "Kustomize base (deploy/kubernetes/runner), which holds it"
        )
    error = failure(response, where)
    if error is not None:
        raise error

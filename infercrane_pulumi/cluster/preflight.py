"""The ownership preflight every ``preview``, ``up`` and ``destroy`` runs before registering.

pulumi-kubernetes would silently adopt a same-named object (its server-side create is an
upsert) and silently rename some foreign field managers to its own. So, before anything is
written: every desired object that exists must be exactly ours and free of such managers, and a
strict server-side dry-run (our field manager, never forced) of every object must succeed. The
decisions are pure functions over values; ``check_before_apply`` is the only I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.cluster.client import (
    Cluster,
    Response,
    connect,
    object_subject,
    raise_for_status,
    status_message,
)
from infercrane_pulumi.errors import OwnershipError, RejectedError
from infercrane_pulumi.intents import StackConfig
from infercrane_pulumi.kinds import Kind
from infercrane_pulumi.manifests import Manifest

# Within the client's connection pool (its default is 5 per CPU), enough to hide round trips.
DRY_RUN_CONCURRENCY = 8

# pulumi-kubernetes silently renames these managers to its own on every real update
# (fixCSAFieldManagers in v4.25), taking over fields somebody else set: we refuse instead.
TAKEOVER_MANAGERS = frozenset(
    {
        ("kubectl", "Apply"),
        ("kubectl", "Update"),
        ("before-first-apply", "Update"),
        ("pulumi-kubernetes", "Update"),
        ("pulumi-kubernetes.exe", "Update"),
        ("pulumi-resource-kubernetes", "Update"),
    }
)


def ownership_problems(desired: Manifest, live: Mapping[str, Any] | None) -> list[str]:
    """Why an existing object at a desired name must not be applied to (empty: safe)."""
    if live is None:
        return []
    what = object_subject(desired)
    meta = live.get("metadata") or {}
    key = desired["metadata"]["annotations"][naming.ANNOTATION_EXTERNAL_KEY]
    if not naming.is_exactly_ours(meta, desired["metadata"]["namespace"], key):
        return [
            f"{what}: exists but is not exactly ours (managed-by, key-hash label and key "
            "annotation must all match); InferCrane never adopts, changes or deletes it"
        ]
    entries = meta.get("managedFields") or []
    if not entries:
        return [f"{what}: has no managedFields, so the provider would force its apply; refusing"]
    return [
        f"{what}: fields {', '.join(field_paths(entry.get('fieldsV1') or {})) or '(none)'} "
        f"managed by {entry.get('manager')!r} ({entry.get('operation')}) would be silently "
        "taken over by pulumi-kubernetes; have that manager release them first"
        for entry in entries
        if (entry.get("manager"), entry.get("operation")) in TAKEOVER_MANAGERS
    ]


def field_paths(fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Leaf paths of a managedFields ``fieldsV1`` set, like ``.spec.replicas``."""
    paths: list[str] = []
    for key, sub in fields.items():
        if key == ".":
            continue
        step = f"{prefix}.{key[2:]}" if key.startswith("f:") else f"{prefix}[{key[2:]}]"
        paths += field_paths(sub, step) if sub else [step]
    return paths


def conflict_problems(obj: Manifest, response: Response) -> list[str]:
    """Describe a strict server-side dry-run that failed: field conflicts or a rejection."""
    what = object_subject(obj)
    if response.status == 409:
        causes = (response.body.get("details") or {}).get("causes") or []
        described = [
            f"{what}: field {cause.get('field', '?')} is owned by another manager "
            f"({cause.get('message', 'conflict')}); InferCrane never forces, the value stays theirs"
            for cause in causes
        ]
        return described or [f"{what}: apply conflict: {status_message(response)}"]
    raise_for_status(response, f"{what}: dry-run apply")
    return []


def api_missing(kind: Kind, api: workloads.WorkloadApi, context: str) -> str:
    return (
        f"{kind.kind} API {kind.group_version} is not served (context {context}): "
        f"{api.install_hint}"
    )


def require_served_apis(cluster: Cluster, api: workloads.WorkloadApi) -> None:
    for kind in api.kinds:
        if not kind.builtin and not cluster.served(kind):
            raise RejectedError(api_missing(kind, api, cluster.context))


def check_before_apply(cluster: Cluster, config: StackConfig, *, dry_run: bool = True) -> None:
    """The preflight: refuse foreign objects and field conflicts before anything is written.

    Without ``dry_run`` only ownership is checked: what a destroy needs, since it applies
    nothing and deletes exactly-ours objects only.
    """
    api = workloads.workload_api(config.kubernetes)
    require_served_apis(cluster, api)
    desired = workloads.stack_objects(config)
    namespace = config.kubernetes.namespace
    # One LIST per kind (metadata only) instead of one GET per object.
    live = {kind.kind: cluster.metadata(kind, namespace) for kind in api.kinds}
    problems: list[str] = []
    for obj in desired:
        meta = live[obj["kind"]].get(obj["metadata"]["name"])
        problems += ownership_problems(obj, None if meta is None else {"metadata": meta})
    if problems:
        raise OwnershipError(problems)
    if not dry_run:
        return
    # Dry-runs are independent requests; the API server handles them concurrently.
    with ThreadPoolExecutor(max_workers=DRY_RUN_CONCURRENCY) as pool:
        answers = list(pool.map(cluster.dry_run_apply, desired))
    for obj, answer in zip(desired, answers, strict=True):
        problems += conflict_problems(obj, answer)
    if problems:
        raise OwnershipError(problems)


def preflight(config: StackConfig) -> None:
    """The program's preflight against the configured cluster (skipped with zero intents)."""
    if config.replicas:
        check_before_apply(connect(config.kubernetes), config)

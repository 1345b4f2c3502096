"""What the API server is asked before anything is written, on every path: one metadata
``snapshot`` of the namespace, whether the workload API is served as the provider needs it, and
a strict server-side dry-run (our field manager, never forced) of every applied object.

``verdict`` judges every object over the snapshot once (whether it is exactly ours, and free of
the field managers pulumi-kubernetes would take over), and ``ownership`` puts the checks
together as the one rule every run obeys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from infercrane_pulumi.cluster.api import Cluster, Response, failure, object_subject, status_message
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.errors import ClusterUnavailableError, OwnershipError, RejectedError
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.kinds import Kind
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.workloadapi import RequiredField, WorkloadApi

# Within the client's connection pool (its default is 5 per CPU), enough to hide round trips.
DRY_RUN_CONCURRENCY = 8

# The metadata of every object of each owned kind in the namespace: kind -> name -> metadata.
Snapshot = Mapping[str, Mapping[str, Mapping[str, Any]]]


def conflict_problems(obj: Manifest, response: Response) -> list[str]:
    """The field conflicts a strict server-side dry-run answered with (409), one line each."""
    what = object_subject(obj)
    causes = (response.body.get("details") or {}).get("causes") or []
    described = [
        f"{what}: field {cause.get('field', '?')} is owned by another manager "
        f"({cause.get('message', 'conflict')}); InferCrane never forces, the value stays theirs"
        for cause in causes
    ]
    return described or [f"{what}: apply conflict: {status_message(response)}"]


def dry_run_refusal(
    objects: Sequence[Manifest], answers: Sequence[Response]
) -> OwnershipError | RejectedError | ClusterUnavailableError | None:
    """One error naming every object whose dry-run failed (None: all passed). Conflicts make it
    an ownership refusal, any other permanent rejection a rejection; it is retryable only when
    every failure was the API server's own."""
    conflicts: list[str] = []
    rejected: list[str] = []
    unavailable: list[str] = []
    for obj, answer in zip(objects, answers, strict=True):
        if answer.status == 409:
            conflicts += conflict_problems(obj, answer)
            continue
        error = failure(answer, f"{object_subject(obj)}: dry-run apply")
        if isinstance(error, ClusterUnavailableError):
            unavailable += error.problems
        elif error is not None:
            rejected += error.problems
    if conflicts:
        return OwnershipError([*conflicts, *rejected, *unavailable])
    if rejected:
        return RejectedError([*rejected, *unavailable])
    return ClusterUnavailableError(unavailable) if unavailable else None


def api_missing(kind: Kind, api: WorkloadApi, context: str) -> str:
    return (
        f"{kind.kind} API {kind.group_version} is not served (context {context}): "
        f"{api.install_hint}"
    )


def schema_problems(
    kind: Kind, schemas: Mapping[str, Any], required: Sequence[RequiredField]
) -> list[str]:
    """The required fields that ``kind``'s published schema lacks, each saying why that
    matters. A server that publishes no schema for ``kind`` leaves nothing to check here."""
    gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    found = [
        schema
        for schema in schemas.values()
        if gvk in (schema.get("x-kubernetes-group-version-kind") or [])
    ]
    if not found:
        return []
    return [
        f"{kind.kind} API {kind.group_version} has no {'.'.join(field.path)} in its schema: "
        f"{field.why}"
        for field in required
        if not _has_path(found[0], field.path)
    ]


def _has_path(schema: Mapping[str, Any] | None, path: Sequence[str]) -> bool:
    for name in path:
        if schema is None:
            return False
        schema = (schema.get("properties") or {}).get(name)
    return schema is not None


def api_problem(cluster: Cluster, kind: Kind, api: WorkloadApi) -> str | None:
    """Why ``kind``'s API as served cannot take this provider's objects (None: it can)."""
    if not cluster.served(kind):
        return api_missing(kind, api, cluster.context)
    required = [field for field in api.requires if field.kind == kind]
    problems = schema_problems(kind, cluster.schemas(kind), required) if required else []
    return f"{'; '.join(problems)} (context {cluster.context})" if problems else None


def require_served_apis(cluster: Cluster, api: WorkloadApi) -> None:
    for kind in api.kinds:
        problem = None if kind.builtin else api_problem(cluster, kind, api)
        if problem is not None:
            raise RejectedError(problem)


def snapshot(cluster: Cluster, settings: KubernetesSettings) -> Snapshot:
    """The namespace's objects of every owned kind, metadata only: one paged LIST per kind, of
    every workload API's kinds, so that the stack's objects of an API it no longer uses are
    judged too. Another API's kind that is not served holds nothing; one this identity may not
    list is left out (unknown: ``verdict`` refuses a run that would need it)."""
    api = workloads.workload_api(settings)
    require_served_apis(cluster, api)
    found = {kind.kind: cluster.metadata(kind, settings.namespace) for kind in api.kinds}
    for kind in workloads.OWNED_KINDS:
        if kind.kind in found:
            continue
        if not kind.builtin and not cluster.served(kind):
            found[kind.kind] = {}
        elif (listed := cluster.metadata_if_allowed(kind, settings.namespace)) is not None:
            found[kind.kind] = listed
    return found


def check_reconcilable(api: WorkloadApi, objects: Sequence[Manifest]) -> None:
    """Refuse, naming each, the objects the API server would take but the workload's
    controller never reconciles (a run would otherwise wait for them forever)."""
    problems = [problem for obj in objects for problem in api.unreconcilable(obj)]
    if problems:
        raise RejectedError(problems)


def check_dry_run(cluster: Cluster, objects: Sequence[Manifest]) -> None:
    """A strict server-side dry-run of every object, refused as one error naming each failure."""
    # Dry-runs are independent requests; the API server handles them concurrently.
    with ThreadPoolExecutor(max_workers=DRY_RUN_CONCURRENCY) as pool:
        answers = list(pool.map(cluster.dry_run_apply, objects))
    refusal = dry_run_refusal(objects, answers)
    if refusal is not None:
        raise refusal

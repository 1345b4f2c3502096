"""``doctor``: can this identity run the stack here? Read-only checks, one row each.

Config, API reachability, every non-builtin API the workload needs (the KServe CRD), a
SelfSubjectAccessReview per verb and owned resource, a list probe, and what the workload API
checks of its controller (KServe's: a served CRD alone makes nothing run). Creates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from infercrane_pulumi.cluster import verdict
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.preflight import api_problem
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.errors import InferCraneError
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.kinds import POD

# What the shipped Role grants on each owned resource, and all the provider ever needs.
OWNED_VERBS = ("get", "list", "create", "patch", "delete")


@dataclass(frozen=True)
class DoctorRow:
    status: str  # ok | fail | warn, info (neither fails the doctor)
    name: str
    message: str


def doctor(cluster: Cluster, settings: KubernetesSettings) -> list[DoctorRow]:
    rows = [DoctorRow("ok", "config", f"valid; context {settings.context}")]
    try:
        rows.append(DoctorRow("ok", "api", f"reachable, {cluster.version()}"))
    except InferCraneError as error:
        return [*rows, DoctorRow("fail", "api", str(error))]
    api = workloads.workload_api(settings)
    for kind in api.kinds:
        if kind.builtin:
            continue
        problem = api_problem(cluster, kind, api)
        rows.append(
            DoctorRow("ok", f"api:{kind.resource}", f"{kind.group_version} served")
            if problem is None
            else DoctorRow("fail", f"api:{kind.resource}", problem)
        )
    for kind in api.kinds:
        for verb in OWNED_VERBS:
            allowed, reason = cluster.can(settings.namespace, verb, kind)
            rows.append(
                DoctorRow(
                    "ok" if allowed else "fail",
                    f"rbac:{verb}:{kind.resource}",
                    f"{'allowed' if allowed else 'denied'} in {settings.namespace}"
                    + (f" ({reason})" if reason and not allowed else ""),
                )
            )
        try:
            labelled = cluster.select(kind, settings.namespace, naming.OWNED_SELECTOR)
            # Our labels alone a look-alike can carry: counted are the exactly-ours.
            found = [
                obj
                for obj in labelled
                if verdict.owner_key(obj.get("metadata") or {}, settings.namespace) is not None
            ]
            rows.append(DoctorRow("ok", f"list:{kind.resource}", f"{len(found)} owned object(s)"))
            if kind == api.workload_kind and api.controller_check is not None:
                rows.append(DoctorRow(*api.controller_check(found)))
        except InferCraneError as error:
            rows.append(DoctorRow("fail", f"list:{kind.resource}", str(error)))
    readable, _ = cluster.can(settings.namespace, "list", POD)
    rows.append(pods_row(readable, needed=api.pods_needed))
    return rows


def pods_row(readable: bool, *, needed: str) -> DoctorRow:
    """Whether observation may read the Pods: optional, except where they are the only proof
    of which intent a ready workload serves (``needed`` says why: KServe's, ``readiness``)."""
    if readable:
        return DoctorRow("ok", "observe:pods", "list allowed: reasons come from the Pods too")
    if needed:
        return DoctorRow(
            "warn", "observe:pods", f"not granted (deploy/kubernetes/observe/): {needed}"
        )
    return DoctorRow(
        "info",
        "observe:pods",
        "not granted (optional: deploy/kubernetes/observe/); reasons come from the "
        "workload's own conditions",
    )

"""Admin preflight: before the suite creates anything, ask the cluster whether it may.

One SelfSubjectAccessReview per permission the suite uses as admin. A context that lacks any
is refused in one line naming each missing permission, before a single object exists. It runs
on the local control plane too, so the list is exercised on every run and cannot rot unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kubernetes import client

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster.bootstrap import shipped_objects
from infercrane_pulumi.objects.workloads import WORKLOAD_APIS

RBAC = "rbac.authorization.k8s.io"
CRDS = "apiextensions.k8s.io"
# Reviews of namespaced permissions name a namespace that need not exist (none does yet).
PROBE_NAMESPACE = "infercrane-conformance-preflight"


class PreflightError(RuntimeError):
    """The admin context may not do what the suite needs; the message is one line."""


@dataclass(frozen=True)
class Permission:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    cluster_wide: bool = False

    def __str__(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        group = f".{self.group}" if self.group else ""
        where = "cluster-wide" if self.cluster_wide else "in a test namespace"
        return f"{self.verb} {resource}{group} {where}"


# What the suite itself does as admin, besides granting the shipped Roles.
SUITE: tuple[Permission, ...] = (
    Permission("create", "namespaces", cluster_wide=True),
    Permission("delete", "namespaces", cluster_wide=True),
    Permission("create", "serviceaccounts"),
    Permission("create", "serviceaccounts", subresource="token"),
    Permission("create", "roles", RBAC),
    Permission("update", "roles", RBAC),  # a doctor scenario takes a verb away
    Permission("create", "rolebindings", RBAC),
    Permission("create", "secrets"),  # the worker Secret
    Permission("create", "configmaps"),  # foreign objects next to ours
    Permission("create", "resourcequotas"),  # an admission rejection
    Permission("list", "endpointslices", "discovery.k8s.io"),
    Permission("list", "nodes", cluster_wide=True),  # GPU nodes a scenario may use
    # The leftover check looks for the run's label everywhere.
    Permission("list", "namespaces", cluster_wide=True),
    Permission("list", "rolebindings", RBAC, cluster_wide=True),
    Permission("list", "roles", RBAC, cluster_wide=True),
    Permission("list", "serviceaccounts", cluster_wide=True),
    Permission("list", "secrets", cluster_wide=True),
    Permission("list", "clusterroles", RBAC, cluster_wide=True),
    Permission("list", "clusterrolebindings", RBAC, cluster_wide=True),
    Permission("list", "customresourcedefinitions", CRDS, cluster_wide=True),
)
# Only when the InferenceService API is absent and the run may install the fixture CRD.
KSERVE_FIXTURE: tuple[Permission, ...] = (
    Permission("create", "customresourcedefinitions", CRDS, cluster_wide=True),
    Permission("delete", "customresourcedefinitions", CRDS, cluster_wide=True),
)


def shipped_role_permissions() -> tuple[Permission, ...]:
    """What the shipped Roles grant: RBAC lets the admin grant only what it holds itself."""
    roles = {
        doc["metadata"]["name"]: doc
        for api in WORKLOAD_APIS
        for doc in shipped_objects(
            PROBE_NAMESPACE, workload_api=api, deploy_dir=DEPLOY_DIR, observe=True
        )
        if doc["kind"] == "Role"
    }.values()
    return tuple(
        Permission(verb, resource, group)
        for role in roles
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    )


def needed(*, install_kserve_crd: bool) -> tuple[Permission, ...]:
    return SUITE + shipped_role_permissions() + (KSERVE_FIXTURE if install_kserve_crd else ())


def missing(
    api: client.ApiClient, permissions: Iterable[Permission], namespace: str = PROBE_NAMESPACE
) -> list[Permission]:
    """The permissions the identity of ``api`` does not hold (namespaced ones in
    ``namespace``), in the order given."""
    authorization = client.AuthorizationV1Api(api)
    lacking = []
    for permission in permissions:
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(
                    namespace=None if permission.cluster_wide else namespace,
                    verb=permission.verb,
                    group=permission.group,
                    resource=permission.resource,
                    subresource=permission.subresource or None,
                )
            )
        )
        status = authorization.create_self_subject_access_review(review).status
        if status is None or not status.allowed:
            lacking.append(permission)
    return lacking


def refusal(context: str, lacking: Sequence[Permission]) -> str:
    return (
        f"context {context!r} is not an admin of this cluster, nothing was "
        f"created; it may not: {'; '.join(str(p) for p in lacking)}"
    )


def require_admin(api: client.ApiClient, context: str, *, install_kserve_crd: bool) -> None:
    """Raise :class:`PreflightError` unless ``api`` may do all the suite does as admin."""
    lacking = missing(api, needed(install_kserve_crd=install_kserve_crd))
    if lacking:
        raise PreflightError(refusal(context, lacking))

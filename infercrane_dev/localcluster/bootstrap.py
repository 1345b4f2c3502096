"""Bootstrap a namespace the way docs/how-to/bootstrap-a-namespace.md tells an operator to.

As admin: the shipped ``deploy/kubernetes`` Kustomize bases, rendered for the target namespace
by ``kubectl kustomize`` of an overlay made as ``overlays/example`` is (its replacement makes
the rule naming the namespace name the target), RoleBindings of the shipped Role(s) to further
identities (by default the local control plane's provider user, what the docs prescribe for a
control plane outside the cluster), and the worker Secret with a fresh random value that is
returned to the caller and never printed or put on a command line. Works on any cluster:
nothing here is local-only.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import utils
from kubernetes.client import ApiClient

from infercrane_dev.localcluster.certs import PROVIDER_USER
from infercrane_dev.toolchain import find_binary
from infercrane_pulumi.config.intents import WorkloadApiName
from infercrane_pulumi.objects.workloads import WORKLOAD_APIS

# The overlay an operator copies; each bootstrap makes one like it (``overlay``).
EXAMPLE_OVERLAY = Path("overlays") / "example" / "kustomization.yaml"
# The ServiceAccount the shipped RoleBindings bind the shipped Roles to.
CONTROL_PLANE_ACCOUNT = "infercrane-control-plane"
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Bootstrapped:
    namespace: str
    roles: tuple[str, ...]
    worker_secret_value: str  # for the caller's leak checks only; never print it


def overlay(namespace: str, bases: Sequence[str], *, deploy_dir: Path, at: Path) -> Any:
    """The example overlay's kustomization for ``namespace`` and ``bases`` (directories of
    ``deploy_dir``), written at ``at`` (Kustomize takes bases by relative path only); the shipped
    images as they are."""
    made = yaml.safe_load((deploy_dir / EXAMPLE_OVERLAY).read_text())
    made["namespace"] = namespace
    made["resources"] = [os.path.relpath(deploy_dir / base, at) for base in bases]
    del made["images"]
    return made


def shipped_objects(
    namespace: str,
    *,
    workload_api: WorkloadApiName,
    deploy_dir: Path,
    observe: bool = False,
) -> list[Any]:
    """The shipped manifests a namespace of ``workload_api`` needs (its Kustomize base from the
    workload-API table, the optional Pod reader), rendered for ``namespace`` by ``kubectl
    kustomize`` (the toolchain's kubectl: ``find_binary``)."""
    bases = [WORKLOAD_APIS[workload_api].manifests, *(["observe"] if observe else [])]
    with tempfile.TemporaryDirectory(prefix="infercrane-overlay-") as work:
        made = overlay(namespace, bases, deploy_dir=deploy_dir, at=Path(work))
        (Path(work) / "kustomization.yaml").write_text(yaml.safe_dump(made))
        rendered = subprocess.run(
            [str(find_binary("kubectl")), "kustomize", work],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    if rendered.returncode != 0:
        last = (rendered.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"kubectl kustomize of {', '.join(bases)}: {last}")
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]


def user_subject(user: str = PROVIDER_USER) -> dict[str, str]:
    return {"apiGroup": RBAC_GROUP, "kind": "User", "name": user}


def service_account_subject(namespace: str, name: str = CONTROL_PLANE_ACCOUNT) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


# Without other instructions, the Roles are also bound to the local control plane's provider
# user (the docs' recipe for a control plane outside the cluster): `make demo`, benchmarks.
LOCAL_PROVIDER_USER: tuple[dict[str, str], ...] = (user_subject(),)


def role_binding(namespace: str, role: str, subject: Mapping[str, str]) -> dict[str, Any]:
    """Binds ``role`` to ``subject``; the name says whom, so several subjects never collide."""
    whom = "user" if subject["kind"] == "User" else f"{subject['namespace']}-{subject['name']}"
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{role}-{whom}", "namespace": namespace},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": role},
        "subjects": [dict(subject)],
    }


def worker_secret(namespace: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "infercrane-worker", "namespace": namespace},
        "type": "Opaque",
        "stringData": {"api-key": value},
    }


def bootstrap_namespace(
    admin: ApiClient,
    namespace: str,
    *,
    deploy_dir: Path,
    workload_api: WorkloadApiName = "deployment",
    observe: bool = False,
    bind_to: Sequence[Mapping[str, str]] = LOCAL_PROVIDER_USER,
    labels: Mapping[str, str] | None = None,
) -> Bootstrapped:
    """Create everything a stack in ``namespace`` needs; objects that already exist are kept.

    ``observe`` also binds the optional read-only Pod Role (``deploy/kubernetes/observe``).
    ``bind_to``: subjects bound to the shipped Role(s) besides the shipped RoleBindings' own
    ServiceAccount (``()`` for exactly the shipped bindings). ``labels`` go on every object
    created, so a caller can find (and remove) exactly what it made.
    """
    documents = shipped_objects(
        namespace, workload_api=workload_api, deploy_dir=deploy_dir, observe=observe
    )
    roles = tuple(doc["metadata"]["name"] for doc in documents if doc["kind"] == "Role")
    value = secrets.token_urlsafe(32)
    documents += [role_binding(namespace, role, subject) for subject in bind_to for role in roles]
    documents.append(worker_secret(namespace, value))
    for document in documents:
        document["metadata"]["labels"] = document["metadata"].get("labels", {}) | dict(labels or {})
        try:
            utils.create_from_dict(admin, document, namespace=namespace)  # type: ignore[no-untyped-call]
        except utils.FailToCreateError as error:
            if any(getattr(cause, "status", None) != 409 for cause in error.api_exceptions):
                raise
    return Bootstrapped(namespace=namespace, roles=roles, worker_secret_value=value)

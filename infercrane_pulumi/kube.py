"""The only module that talks to the Kubernetes API directly (Pulumi's provider aside).

It reads and dry-runs; it never writes. Three users: the ownership preflight that every
``preview``/``up`` runs before registering anything, ``doctor``, and ``inspect``. Decisions are
pure functions over values (desired object vs. live object); the HTTP transport is injectable so
tests can drive the same code with recorded answers. API failures are mapped to the project's
errors in one place, with messages built from the API ``Status`` only, never from raw transport
output that could carry credentials.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml
from kubernetes import config as kubeconfig_loader
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from infercrane_pulumi import manifests, naming
from infercrane_pulumi.errors import (
    ClusterUnavailableError,
    ConfigError,
    InferCraneError,
    OwnershipError,
    RejectedError,
)
from infercrane_pulumi.intents import KubernetesSettings, StackConfig
from infercrane_pulumi.manifests import Manifest

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
REQUEST_TIMEOUT_SECONDS = 15
OWNED_VERBS = ("get", "list", "create", "patch", "delete")

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


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection(self, namespace: str) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{base}/namespaces/{namespace}/{self.plural}"

    def path(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{name}"


DEPLOYMENT = Kind("Deployment", "apps", "v1", "deployments")
SERVICE = Kind("Service", "", "v1", "services")
INFERENCE_SERVICE = Kind("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices")
KINDS = {kind.kind: kind for kind in (DEPLOYMENT, SERVICE, INFERENCE_SERVICE)}


def owned_kinds(settings: KubernetesSettings) -> tuple[Kind, ...]:
    return (INFERENCE_SERVICE,) if settings.workload_api == "kserve" else (DEPLOYMENT, SERVICE)


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]


class Transport(Protocol):
    """One HTTP request to the API server; raises ClusterUnavailableError when it cannot."""

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Response: ...


def subject(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _status_message(response: Response) -> str:
    message = str(response.body.get("message") or response.body.get("reason") or "")
    return message[:300] or f"HTTP {response.status}"


def raise_for_status(response: Response, what: str) -> None:
    """Map a non-2xx answer to the project's errors (5xx and 429 are retryable)."""
    if response.status < 300:
        return
    if response.status >= 500 or response.status == 429:
        raise ClusterUnavailableError(f"{what}: API server answered {response.status}, try again")
    raise RejectedError(f"{what}: {_status_message(response)}")


def _object_subject(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return subject(obj["kind"], meta["namespace"], meta["name"])


# --- pure decisions -------------------------------------------------------------------------


def ownership_problems(desired: Manifest, live: Mapping[str, Any] | None) -> list[str]:
    """Why an existing object at a desired name must not be applied to (empty: safe)."""
    if live is None:
        return []
    what = _object_subject(desired)
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
    what = _object_subject(obj)
    if response.status == 409:
        causes = (response.body.get("details") or {}).get("causes") or []
        described = [
            f"{what}: field {cause.get('field', '?')} is owned by another manager "
            f"({cause.get('message', 'conflict')}); InferCrane never forces, the value stays theirs"
            for cause in causes
        ]
        return described or [f"{what}: apply conflict: {_status_message(response)}"]
    raise_for_status(response, f"{what}: dry-run apply")
    return []


# --- the client -----------------------------------------------------------------------------


@dataclass
class Cluster:
    """Reads and dry-runs against one API server, under one identity."""

    transport: Transport
    context: str = ""

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        response = self.transport.request("GET", kind.path(namespace, name))
        if response.status == 404:
            return None
        raise_for_status(response, subject(kind.kind, namespace, name))
        return response.body

    def list(self, kind: Kind, namespace: str, selector: str) -> list[dict[str, Any]]:
        response = self.transport.request(
            "GET", kind.collection(namespace), query=[("labelSelector", selector)]
        )
        raise_for_status(response, f"list {kind.plural} in {namespace}")
        return list(response.body.get("items") or [])

    def dry_run_apply(self, obj: Manifest) -> Response:
        meta = obj["metadata"]
        return self.transport.request(
            "PATCH",
            KINDS[obj["kind"]].path(meta["namespace"], meta["name"]),
            query=[("fieldManager", naming.FIELD_MANAGER), ("dryRun", "All"), ("force", "false")],
            body=obj,
            content_type=APPLY_CONTENT_TYPE,
        )

    def served(self, kind: Kind) -> bool:
        response = self.transport.request("GET", f"/apis/{kind.group_version}")
        if response.status == 404:
            return False
        raise_for_status(response, f"discovery of {kind.group_version}")
        return any(item.get("name") == kind.plural for item in response.body.get("resources", []))

    def version(self) -> str:
        response = self.transport.request("GET", "/version")
        raise_for_status(response, "API server version")
        return str(response.body.get("gitVersion", "unknown"))

    def can(self, namespace: str, verb: str, kind: Kind) -> tuple[bool, str]:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "group": kind.group,
                    "resource": kind.plural,
                }
            },
        }
        response = self.transport.request(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review
        )
        raise_for_status(response, f"access review {verb} {kind.plural}")
        status = response.body.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason", ""))


def kserve_missing(cluster: Cluster) -> str:
    return (
        f"InferenceService API {INFERENCE_SERVICE.group_version} is not served "
        f"(context {cluster.context}): install KServe and its CRDs first, then apply "
        "deploy/kubernetes/kserve/provider-rbac.yaml"
    )


def check_before_apply(cluster: Cluster, config: StackConfig) -> None:
    """The preflight: refuse foreign objects and field conflicts before anything is written."""
    settings = config.kubernetes
    if settings.workload_api == "kserve" and not cluster.served(INFERENCE_SERVICE):
        raise RejectedError(kserve_missing(cluster))
    desired = manifests.stack_objects(config)
    problems: list[str] = []
    for obj in desired:
        meta = obj["metadata"]
        live = cluster.get(KINDS[obj["kind"]], meta["namespace"], meta["name"])
        problems += ownership_problems(obj, live)
    if problems:
        raise OwnershipError(problems)
    for obj in desired:
        problems += conflict_problems(obj, cluster.dry_run_apply(obj))
    if problems:
        raise OwnershipError(problems)


# --- connecting -----------------------------------------------------------------------------


class RestTransport:
    """``Transport`` over the official client's REST layer, with kubeconfig auth and TLS."""

    def __init__(self, api_client: Any) -> None:
        self._api = api_client

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Response:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            method, url, headers, payload, _ = self._api.param_serialize(
                method,
                path,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            answer = self._api.call_api(
                method,
                url,
                header_params=headers,
                body=payload,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
            status, raw = answer.status, answer.read()
        except ApiException as error:
            status, raw = int(error.status or 0), error.body or b""
        except Exception as error:  # urllib3/ssl/socket errors: their text may carry URLs
            raise ClusterUnavailableError(
                f"cannot reach the API server ({type(error).__name__}); check the context "
                "and that the cluster is up"
            ) from error
        return Response(status=status, body=_json_object(raw))


def _json_object(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def connect(settings: KubernetesSettings) -> Cluster:
    """A client for exactly the configured context; never the kubeconfig's current context."""
    source = settings.kubeconfig
    try:
        if source is not None and _looks_like_contents(source):
            api_client = kubeconfig_loader.new_client_from_config_dict(  # type: ignore[no-untyped-call]
                yaml.safe_load(source), context=settings.context
            )
        else:
            # The client reads KUBECONFIG once at import; read it now, as kubectl would.
            api_client = kubeconfig_loader.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=source or os.environ.get("KUBECONFIG"), context=settings.context
            )
    except (ConfigException, OSError, yaml.YAMLError, TypeError) as error:
        raise ConfigError(
            [
                f"infercrane:kubernetes.context: cannot load context {settings.context!r} "
                f"from the kubeconfig ({type(error).__name__})"
            ]
        ) from error
    return Cluster(RestTransport(api_client), context=settings.context)


def _looks_like_contents(kubeconfig: str) -> bool:
    # A path is one line; kubeconfig contents are multi-line YAML or one-line JSON.
    return "\n" in kubeconfig or kubeconfig.lstrip().startswith("{")


def preflight(config: StackConfig) -> None:
    """The program's preflight against the configured cluster (skipped with zero intents)."""
    if config.replicas:
        check_before_apply(connect(config.kubernetes), config)


@dataclass
class DoctorRow:
    status: str
    name: str
    message: str


@dataclass
class InventoryEntry:
    external_key: str
    state: str
    objects: list[dict[str, Any]] = field(default_factory=list)


def doctor(cluster: Cluster, settings: KubernetesSettings) -> list[DoctorRow]:
    """Read-only readiness checks; never creates a workload."""
    rows = [DoctorRow("ok", "config", f"valid; context {settings.context}")]
    try:
        rows.append(DoctorRow("ok", "api", f"reachable, {cluster.version()}"))
    except InferCraneError as error:
        return [*rows, DoctorRow("fail", "api", str(error))]
    if settings.workload_api == "kserve":
        served = cluster.served(INFERENCE_SERVICE)
        rows.append(
            DoctorRow("ok", "kserve-api", f"{INFERENCE_SERVICE.group_version} served")
            if served
            else DoctorRow("fail", "kserve-api", kserve_missing(cluster))
        )
    for kind in owned_kinds(settings):
        resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
        for verb in OWNED_VERBS:
            allowed, reason = cluster.can(settings.namespace, verb, kind)
            rows.append(
                DoctorRow(
                    "ok" if allowed else "fail",
                    f"rbac:{verb}:{resource}",
                    f"{'allowed' if allowed else 'denied'} in {settings.namespace}"
                    + (f" ({reason})" if reason and not allowed else ""),
                )
            )
        try:
            found = cluster.list(kind, settings.namespace, naming.OWNED_SELECTOR)
            rows.append(DoctorRow("ok", f"list:{resource}", f"{len(found)} owned object(s)"))
        except InferCraneError as error:
            rows.append(DoctorRow("fail", f"list:{resource}", str(error)))
    return rows


def conditions_summary(obj: Mapping[str, Any]) -> str:
    """Raw conditions as ``Type=Status`` pairs, the way inspect and the demo show them."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return ",".join(f"{c.get('type')}={c.get('status')}" for c in conditions) or "-"


def replica_state(settings: KubernetesSettings, objects: Iterable[Mapping[str, Any]]) -> str:
    """ready | provisioning | failed | degraded (some of its objects are missing) | absent."""
    by_kind = {obj["kind"]: obj for obj in objects}
    expected = {kind.kind for kind in owned_kinds(settings)}
    if not by_kind:
        return "absent"
    if set(by_kind) != expected:
        return "degraded"
    workload = by_kind.get("Deployment") or by_kind["InferenceService"]
    conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions", [])}
    if workload["kind"] == "Deployment":
        progressing = conditions.get("Progressing") or {}
        if progressing.get("reason") == "ProgressDeadlineExceeded":
            return "failed"
        ready = int((workload.get("status") or {}).get("readyReplicas") or 0) >= 1
        return "ready" if ready else "provisioning"
    return "ready" if (conditions.get("Ready") or {}).get("status") == "True" else "provisioning"


def inventory(cluster: Cluster, config: StackConfig) -> list[InventoryEntry]:
    """Exactly-ours objects grouped by external key; stack keys first, strays after."""
    settings = config.kubernetes
    grouped: dict[str, list[dict[str, Any]]] = {i.external_key: [] for i in config.replicas}
    strays: dict[str, list[dict[str, Any]]] = {}
    for kind in owned_kinds(settings):
        for item in cluster.list(kind, settings.namespace, naming.OWNED_SELECTOR):
            item.setdefault("kind", kind.kind)
            key = naming.owner_key(item.get("metadata") or {}, settings.namespace)
            if key is not None:
                (grouped if key in grouped else strays).setdefault(key, []).append(item)
    entries = [InventoryEntry(k, replica_state(settings, v), v) for k, v in grouped.items()]
    entries += [InventoryEntry(k, "orphaned", v) for k, v in sorted(strays.items())]
    return entries

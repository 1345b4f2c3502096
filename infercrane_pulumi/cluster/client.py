"""The API client: one HTTP door to one API server under one identity.

The only importer of ``kubernetes`` in the product. Answers and transport failures are mapped to
the project's errors here, by cause, because a caller retries on the class alone: an unreachable
or overloaded server (network failures, 5xx, 429) is retryable; a certificate, credentials or
permissions that the server or we refused are permanent, each with its own code; anything else
is a bug. Messages are built from the API ``Status`` message and exception type names only, never
from raw transport output that could carry URLs, tokens or certificates. The transport is a
protocol so the decisions above it run in unit tests with recorded answers.
"""

from __future__ import annotations

import atexit
import functools
import http.client
import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import urllib3
import yaml
from kubernetes import config as kubeconfig_loader
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from infercrane_pulumi import private_dirs
from infercrane_pulumi.config.intents import KUBERNETES_KEY, KubernetesSettings
from infercrane_pulumi.config.kubeconfigs import ClusterIdentity
from infercrane_pulumi.config.validators import kubeconfig_document
from infercrane_pulumi.errors import (
    ClusterAuthenticationError,
    ClusterForbiddenError,
    ClusterTlsError,
    ClusterUnavailableError,
    ConfigError,
    InferCraneError,
    InternalError,
    RejectedError,
)
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.kinds import KINDS, Kind
from infercrane_pulumi.objects.manifests import Manifest

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
# Metadata only (labels, annotations, managedFields): what ownership decisions read, at a
# fraction of the bytes of whole objects.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
LIST_PAGE = 500
KEY_FILES_PREFIX = "infercrane-keys-"
REQUEST_TIMEOUT_SECONDS = 15
# A paged LIST reads one snapshot, which the server keeps only until etcd compacts it (minutes);
# a list that outlives it is read again from its first page, a few times at most.
LIST_RESTARTS = 3

# TLS errors that are the connection dropping mid-handshake (a restarting API server, a cut
# proxy), not a refused certificate: as retryable as any other dropped connection.
_DROPPED_TLS = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)
_TLS = (ssl.SSLError, urllib3.exceptions.SSLError)
# The network failing under the client: socket errors (refused, reset, DNS, timeouts are all
# OSErrors), a cut or malformed HTTP answer, and urllib3's names for these, its retries exhausted
# (MaxRetryError) and too many 5xx/429 answers (ResponseError) included.
_TRANSPORT = (
    OSError,
    http.client.HTTPException,
    urllib3.exceptions.ProtocolError,
    urllib3.exceptions.TimeoutError,
    urllib3.exceptions.ProxyError,
    urllib3.exceptions.MaxRetryError,
    urllib3.exceptions.ResponseError,
)


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]


class Transport(Protocol):
    """One HTTP request to the API server. Raises ClusterUnavailableError when the server
    cannot be reached, ClusterTlsError when no TLS session can be had, InternalError otherwise."""

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Response: ...


def subject(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def object_subject(obj: Manifest) -> str:
    meta = obj["metadata"]
    return subject(obj["kind"], meta["namespace"], meta["name"])


def status_message(response: Response) -> str:
    """The Status message on one line (an admission webhook's may span several)."""
    message = str(response.body.get("message") or response.body.get("reason") or "")
    return " ".join(message.split())[:300] or f"HTTP {response.status}"


def failure(response: Response, what: str) -> InferCraneError | None:
    """The typed error a non-2xx answer means (5xx and 429 are retryable), None for success."""
    if response.status < 300:
        return None
    if response.status >= 500 or response.status == 429:
        return ClusterUnavailableError(f"{what}: API server answered {response.status}, try again")
    if response.status == 401:
        return ClusterAuthenticationError(
            f"{what}: {status_message(response)}; check the credentials of the kubeconfig context"
        )
    if response.status == 403:
        return ClusterForbiddenError(f"{what}: {status_message(response)}")
    return RejectedError(f"{what}: {status_message(response)}")


def raise_for_status(response: Response, what: str) -> None:
    error = failure(response, what)
    if error is not None:
        raise error


@dataclass
class Cluster:
    """One API server under one identity: reads, dry-runs, deletions by uid (the run's own),
    and the one apply outside the engine, the runner's status object (``cluster.runstatus``)."""

    transport: Transport
    context: str = ""
    # The API server this client reaches (None: a recorded transport, in unit tests).
    identity: ClusterIdentity | None = None

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        response = self.transport.request("GET", kind.path(namespace, name))
        if response.status == 404:
            return None
        raise_for_status(response, subject(kind.kind, namespace, name))
        return response.body

    def select(self, kind: Kind, namespace: str, selector: str) -> list[dict[str, Any]]:
        """Matching objects, each with its ``kind`` set (list items come without it)."""
        items = self.list_if_allowed(kind, namespace, selector)
        if items is None:
            raise ClusterForbiddenError(f"list {kind.resource} in {namespace}: forbidden")
        return items

    def list_if_allowed(
        self, kind: Kind, namespace: str, selector: str
    ) -> list[dict[str, Any]] | None:
        """Like ``select``, but None when this identity may not list the kind (403)."""
        response = self.transport.request(
            "GET", kind.collection(namespace), query=[("labelSelector", selector)]
        )
        if response.status == 403:
            return None
        raise_for_status(response, f"list {kind.resource} in {namespace}")
        return [item | {"kind": kind.kind} for item in response.body.get("items") or []]

    def metadata(self, kind: Kind, namespace: str) -> dict[str, dict[str, Any]]:
        """The metadata of every object of ``kind`` in ``namespace``, by name (paged LIST).

        A continue token the server has let expire (410) restarts the list from its first page,
        up to ``LIST_RESTARTS`` times: pages of two snapshots are never mixed.
        """
        what = f"list {kind.resource} in {namespace}"
        found: dict[str, dict[str, Any]] = {}
        token = ""
        restarts = 0
        while True:
            query = [("limit", str(LIST_PAGE))] + ([("continue", token)] if token else [])
            response = self.transport.request(
                "GET", kind.collection(namespace), query=query, accept=METADATA_LIST
            )
            # Whatever its reason, a 410 to a continued page means that snapshot is gone.
            if response.status == 410 and token:
                if restarts == LIST_RESTARTS:
                    raise ClusterUnavailableError(
                        f"{what}: the list expired {restarts + 1} times before its last page; "
                        "try again"
                    )
                restarts += 1
                found, token = {}, ""
                continue
            raise_for_status(response, what)
            for item in response.body.get("items") or []:
                meta = item.get("metadata") or {}
                found[str(meta.get("name"))] = meta
            token = str((response.body.get("metadata") or {}).get("continue") or "")
            if not token:
                return found

    def metadata_if_allowed(self, kind: Kind, namespace: str) -> dict[str, dict[str, Any]] | None:
        """Like ``metadata``, but None when this identity may not list the kind (403)."""
        try:
            return self.metadata(kind, namespace)
        except ClusterForbiddenError:
            return None

    def dry_run_apply(self, obj: Manifest) -> Response:
        return self._apply(KINDS[obj["kind"]], obj, [("dryRun", "All")])

    def apply(self, kind: Kind, obj: Manifest) -> Response:
        """Server-side apply of ``obj`` under the provider's field manager, never forced."""
        return self._apply(kind, obj, [])

    def _apply(self, kind: Kind, obj: Manifest, extra: list[tuple[str, str]]) -> Response:
        meta = obj["metadata"]
        return self.transport.request(
            "PATCH",
            kind.path(meta["namespace"], meta["name"]),
            query=[("fieldManager", naming.FIELD_MANAGER), *extra, ("force", "false")],
            body=obj,
            content_type=APPLY_CONTENT_TYPE,
        )

    def delete(self, obj: Manifest, *, uid: str) -> Response:
        """Delete ``obj`` only if it still has ``uid``, its dependents in the background."""
        meta = obj["metadata"]
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": uid},
        }
        return self.transport.request(
            "DELETE", KINDS[obj["kind"]].path(meta["namespace"], meta["name"]), body=options
        )

    def served(self, kind: Kind) -> bool:
        response = self.transport.request("GET", f"/apis/{kind.group_version}")
        if response.status == 404:
            return False
        raise_for_status(response, f"discovery of {kind.group_version}")
        return any(item.get("name") == kind.plural for item in response.body.get("resources", []))

    def schemas(self, kind: Kind) -> dict[str, Any]:
        """The OpenAPI v3 schemas the API server publishes for ``kind``'s group version, by
        name (every authenticated identity may read them; empty: none published)."""
        prefix = f"/apis/{kind.group_version}" if kind.group else f"/api/{kind.version}"
        response = self.transport.request("GET", f"/openapi/v3{prefix}")
        if response.status == 404:
            return {}
        raise_for_status(response, f"OpenAPI schema of {kind.group_version}")
        return dict((response.body.get("components") or {}).get("schemas") or {})

    def namespace_uid(self, namespace: str) -> str | None:
        """``namespace``'s uid (None: this identity may not read it, or it does not exist)."""
        response = self.transport.request("GET", f"/api/v1/namespaces/{namespace}")
        if response.status in (403, 404):
            return None
        raise_for_status(response, f"namespace {namespace}")
        return str((response.body.get("metadata") or {}).get("uid") or "") or None

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
        accept: str = "application/json",
    ) -> Response:
        headers = {"Accept": accept, "Content-Type": content_type}
        raw: bytes | str
        try:
            status, raw = self._send(method, path, list(query), headers, body)
        except ApiException as error:
            if not error.status:  # no answer: the client's own failure (TLS ones are re-raised so)
                raise _transport_failure(error) from error
            status, raw = int(error.status), error.body or b""
        except Exception as error:
            raise _transport_failure(error) from error
        return Response(status=status, body=_json_object(raw))

    def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
    ) -> tuple[int, bytes]:
        """One request through whichever REST layer the installed client has: kubernetes 37
        regenerated it (``param_serialize`` then ``call_api(method, url)``); 31-36 take the path
        in ``call_api`` and hand back the raw urllib3 response. Both add the kubeconfig's auth and
        raise ``ApiException`` for a non-2xx answer."""
        if hasattr(self._api, "param_serialize"):
            method, url, headers, payload, _ = self._api.param_serialize(
                method,
                path,
                query_params=query,
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
            return int(answer.status), bytes(answer.read())
        answer = self._api.call_api(
            path,
            method,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )
        return int(answer.status), bytes(answer.data)


def _root_cause(error: BaseException) -> BaseException:
    """The failure ``error`` wraps, unwrapped as far as it goes: a MaxRetryError's last reason,
    a ProxyError's original error, the ssl or socket error inside urllib3's own, the error the
    client re-raised as a status-0 ApiException."""
    for _ in range(8):  # wrappers nest two or three deep; the bound only guards against a cycle
        inner: BaseException | None = None
        if isinstance(error, urllib3.exceptions.MaxRetryError):
            inner = error.reason
        elif isinstance(error, urllib3.exceptions.ProxyError):
            inner = error.original_error
        elif isinstance(error, ApiException):
            inner = error.__context__
        elif isinstance(error, urllib3.exceptions.SSLError | urllib3.exceptions.ProtocolError):
            inner = next((arg for arg in error.args if isinstance(arg, BaseException)), None)
        if inner is None:
            return error
        error = inner
    return error


def _transport_failure(error: BaseException) -> InferCraneError:
    """The typed error a failed request means, by its root cause, named by type only: the text
    of a transport error may carry URLs, tokens or certificates."""
    cause = _root_cause(error)
    name = type(cause).__name__
    if isinstance(cause, _TLS) and not isinstance(cause, _DROPPED_TLS):
        return ClusterTlsError(
            f"cannot establish TLS with the API server ({name}); check the kubeconfig context's "
            "server address, certificate authority and client certificate"
        )
    if isinstance(cause, _TRANSPORT):
        return ClusterUnavailableError(
            f"cannot reach the API server ({name}); check the context and that the cluster is up"
        )
    return InternalError.of(cause, where="Kubernetes API client")


def _json_object(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@functools.cache
def _key_files() -> Path:
    """This process's private directory for the client's key files: removed when it exits, and
    by the next process to connect if it is killed (``private_dirs``)."""
    path = private_dirs.made(KEY_FILES_PREFIX)
    atexit.register(private_dirs.removed, path)
    return path


def connect(settings: KubernetesSettings) -> Cluster:
    """A client for exactly the configured context of exactly the resolved kubeconfig
    (``kubeconfigs.resolved``); never the kubeconfig's current context, never a process's
    ``KUBECONFIG``."""
    source = settings.kubeconfig
    if source is None:
        raise InternalError(f"{KUBERNETES_KEY}.kubeconfig: connect before it was resolved")
    contents = kubeconfig_document(source)
    configuration = Configuration()
    # The library writes a kubeconfig's key and certificate data to files for TLS: into this
    # process's private directory, never the shared temporary one.
    where = {
        "context": settings.context,
        "client_configuration": configuration,
        "temp_file_path": str(_key_files()),
    }
    try:
        if contents is not None:
            kubeconfig_loader.load_kube_config_from_dict(dict(contents), **where)  # type: ignore[no-untyped-call]
        else:
            kubeconfig_loader.load_kube_config(config_file=source, **where)  # type: ignore[no-untyped-call]
        api_client = ApiClient(configuration)
        ca = configuration.ssl_ca_cert
        identity = ClusterIdentity.of(
            configuration.host, None if ca is None else Path(ca).read_bytes()
        )
    except (ConfigException, OSError, yaml.YAMLError, TypeError, ValueError) as error:
        raise ConfigError(
            f"{KUBERNETES_KEY}.context: cannot load context {settings.context!r} "
            f"from the kubeconfig ({type(error).__name__})"
        ) from error
    return Cluster(RestTransport(api_client), context=settings.context, identity=identity)

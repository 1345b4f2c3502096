"""The API client: one HTTP door to one API server under one identity (``connect``).

The only importer of ``kubernetes`` in the product. Transport failures are mapped to the
project's errors here, by cause, because a caller retries on the class alone: an unreachable
server (network failures) is retryable; a certificate we refused is permanent; anything else is
a bug. Messages are built from exception type names only, never from raw transport output that
could carry URLs, tokens or certificates. What is asked over the door, and what its answers
mean, is ``api``'s: the transport is a protocol there, so those decisions run in unit tests with
recorded answers.
"""

from __future__ import annotations

import atexit
import functools
import http.client
import json
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import config as kubeconfig_loader
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from infercrane_pulumi import private_dirs
from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.config.intents import KUBERNETES_KEY, KubernetesSettings
from infercrane_pulumi.config.kubeconfigs import ClusterIdentity
from infercrane_pulumi.config.validators import kubeconfig_document
from infercrane_pulumi.errors import (
    ClusterTlsError,
    ClusterUnavailableError,
    ConfigError,
    InferCraneError,
    InternalError,
)

KEY_FILES_PREFIX = "infercrane-keys-"
REQUEST_TIMEOUT_SECONDS = 15

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

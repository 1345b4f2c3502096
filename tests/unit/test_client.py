"""The client's error mapping by cause: what a caller may retry (an unreachable or overloaded
server) against what it may not (a certificate, credentials or permissions refused, a bug), each
with its code and one line that echoes nothing of the transport; and a paged LIST that outlives
its snapshot, read again from its first page."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from urllib3.connection import HTTPSConnection
from urllib3.exceptions import (
    ConnectTimeoutError,
    IncompleteRead,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ProxyError,
    ReadTimeoutError,
    ResponseError,
)
from urllib3.exceptions import SSLError as Urllib3SSLError

from infercrane_pulumi.cluster.api import LIST_RESTARTS, Cluster, Response, failure
from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.errors import (
    ClusterAuthenticationError,
    ClusterForbiddenError,
    ClusterTlsError,
    ClusterUnavailableError,
    InferCraneError,
    InternalError,
    RejectedError,
)
from infercrane_pulumi.objects.kinds import DEPLOYMENT
from tests.unit.fake_cluster import NS, FakeTransport

SECRET_URL = "https://10.0.0.1:6443/api?token=s3cr3t"
POOL = urllib3.HTTPSConnectionPool("10.0.0.1", 6443)
CONNECTION = HTTPSConnection("10.0.0.1", 6443)
UNREACHABLE = "; check the context and that the cluster is up"
NO_TLS = (
    "; check the kubeconfig context's server address, certificate authority and client certificate"
)


def the_error(error: InferCraneError | None) -> tuple[type[InferCraneError], str, bool, str]:
    """An error as the whole value a caller acts on: class, code, retryable, message."""
    assert error is not None
    return type(error), error.code, error.retryable, str(error)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            503,
            {"message": "etcdserver: leader changed"},
            (
                ClusterUnavailableError,
                "cluster-unavailable",
                True,
                "Deployment/ns/x: API server answered 503, try again",
            ),
        ),
        (
            429,
            {"message": "too many requests, please try again later"},
            (
                ClusterUnavailableError,
                "cluster-unavailable",
                True,
                "Deployment/ns/x: API server answered 429, try again",
            ),
        ),
        (
            401,
            {"kind": "Status", "message": "Unauthorized", "reason": "Unauthorized", "code": 401},
            (
                ClusterAuthenticationError,
                "cluster-unauthenticated",
                False,
                "Deployment/ns/x: Unauthorized; check the credentials of the kubeconfig context",
            ),
        ),
        (
            403,
            {
                "message": 'deployments.apps "x" is forbidden: User "u" cannot get resource '
                '"deployments" in API group "apps" in the namespace "ns"',
                "reason": "Forbidden",
            },
            (
                ClusterForbiddenError,
                "cluster-forbidden",
                False,
                'Deployment/ns/x: deployments.apps "x" is forbidden: User "u" cannot get '
                'resource "deployments" in API group "apps" in the namespace "ns"',
            ),
        ),
        (
            422,
            {"message": 'admission webhook "policy" denied the request:\n  replicas: too many'},
            (
                RejectedError,
                "rejected",
                False,
                'Deployment/ns/x: admission webhook "policy" denied the request: '
                "replicas: too many",
            ),
        ),
        (404, {}, (RejectedError, "rejected", False, "Deployment/ns/x: HTTP 404")),
    ],
    ids=["503", "429", "401", "403", "422-multiline", "404-no-status"],
)
def test_each_answer_means_one_error_by_its_status(
    status: int, body: dict[str, Any], expected: tuple[type[InferCraneError], str, bool, str]
) -> None:
    assert the_error(failure(Response(status, body), "Deployment/ns/x")) == expected


def test_success_is_no_error_and_refused_credentials_or_permissions_are_rejections() -> None:
    assert failure(Response(200, {}), "Deployment/ns/x") is None
    # Callers that handle ``RejectedError`` (a permanent refusal) keep seeing 401 and 403.
    assert issubclass(ClusterAuthenticationError, RejectedError)
    assert issubclass(ClusterForbiddenError, RejectedError)
    # A refused certificate was ClusterUnavailableError before: no RejectedError handler knew it.
    assert not issubclass(ClusterTlsError, RejectedError | ClusterUnavailableError)


def test_a_forbidden_list_is_none_where_allowed_and_a_forbidden_error_where_required() -> None:
    forbidden = Response(403, {"reason": "Forbidden"})
    cluster = Cluster(FakeTransport({("GET", DEPLOYMENT.collection(NS)): forbidden}))
    assert cluster.list_if_allowed(DEPLOYMENT, NS, "a=b") is None
    with pytest.raises(ClusterForbiddenError) as refused:
        cluster.select(DEPLOYMENT, NS, "a=b")
    assert the_error(refused.value) == (
        ClusterForbiddenError,
        "cluster-forbidden",
        False,
        f"list deployments.apps in {NS}: forbidden",
    )


def reraised_by_the_client(tls_failure: BaseException) -> ApiException:
    """What the official client raises for a TLS failure when urllib3 does not retry it: a
    status-0 ApiException raised while handling urllib3's SSLError (its text in ``reason``)."""
    try:
        try:
            raise Urllib3SSLError(tls_failure)
        except Urllib3SSLError as error:
            # As the client does: no ``from``, so the SSLError is only the implicit context.
            raise ApiException(status=0, reason=f"SSLError\n{error} {SECRET_URL}")  # noqa: B904
    except ApiException as reraised:
        return reraised


VERIFY_FAILED = ssl.SSLCertVerificationError(
    1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed for {SECRET_URL}"
)

# A raised exception, and the (class, code, retryable, message) it must become.
TRANSPORT_FAILURES: list[
    tuple[str, BaseException, tuple[type[InferCraneError], str, bool, str]]
] = [
    (
        "retries-exhausted",
        MaxRetryError(POOL, SECRET_URL),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (MaxRetryError){UNREACHABLE}",
        ),
    ),
    (
        "connection-refused",
        MaxRetryError(
            POOL,
            SECRET_URL,
            NewConnectionError(CONNECTION, f"{SECRET_URL}: [Errno 111] Connection refused"),
        ),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (NewConnectionError){UNREACHABLE}",
        ),
    ),
    (
        "dns",
        MaxRetryError(
            POOL,
            SECRET_URL,
            NameResolutionError("10.0.0.1", CONNECTION, socket.gaierror(-2, "Name not known")),
        ),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (NameResolutionError){UNREACHABLE}",
        ),
    ),
    (
        "connect-timeout",
        MaxRetryError(POOL, SECRET_URL, ConnectTimeoutError(CONNECTION, f"{SECRET_URL} timed out")),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (ConnectTimeoutError){UNREACHABLE}",
        ),
    ),
    (
        "connection-reset",
        MaxRetryError(
            POOL,
            SECRET_URL,
            ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer")),
        ),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (ConnectionResetError){UNREACHABLE}",
        ),
    ),
    (
        "read-timeout",
        ReadTimeoutError(POOL, SECRET_URL, "Read timed out. (read timeout=15)"),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (ReadTimeoutError){UNREACHABLE}",
        ),
    ),
    (
        "body-cut",
        ProtocolError("Connection broken: IncompleteRead", IncompleteRead(10, 90)),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (IncompleteRead){UNREACHABLE}",
        ),
    ),
    (
        "refused-socket",
        ConnectionRefusedError(111, f"Connection refused: {SECRET_URL}"),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (ConnectionRefusedError){UNREACHABLE}",
        ),
    ),
    (
        "too-many-5xx",
        MaxRetryError(POOL, SECRET_URL, ResponseError("too many 503 error responses")),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (ResponseError){UNREACHABLE}",
        ),
    ),
    (
        "handshake-dropped",
        MaxRetryError(
            POOL,
            SECRET_URL,
            Urllib3SSLError(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")),
        ),
        (
            ClusterUnavailableError,
            "cluster-unavailable",
            True,
            f"cannot reach the API server (SSLEOFError){UNREACHABLE}",
        ),
    ),
    (
        "certificate-verify-failed",
        MaxRetryError(POOL, SECRET_URL, Urllib3SSLError(VERIFY_FAILED)),
        (
            ClusterTlsError,
            "cluster-tls",
            False,
            f"cannot establish TLS with the API server (SSLCertVerificationError){NO_TLS}",
        ),
    ),
    (
        "unknown-ca-alert",
        ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca"),
        (
            ClusterTlsError,
            "cluster-tls",
            False,
            f"cannot establish TLS with the API server (SSLError){NO_TLS}",
        ),
    ),
    (
        "urllib3-ssl-error",
        Urllib3SSLError(f"bad handshake with {SECRET_URL}"),
        (
            ClusterTlsError,
            "cluster-tls",
            False,
            f"cannot establish TLS with the API server (SSLError){NO_TLS}",
        ),
    ),
    (
        "proxy-certificate",
        MaxRetryError(
            POOL,
            SECRET_URL,
            ProxyError("Unable to connect to proxy", Urllib3SSLError(VERIFY_FAILED)),
        ),
        (
            ClusterTlsError,
            "cluster-tls",
            False,
            f"cannot establish TLS with the API server (SSLCertVerificationError){NO_TLS}",
        ),
    ),
    (
        "client-reraised-tls",
        reraised_by_the_client(VERIFY_FAILED),
        (
            ClusterTlsError,
            "cluster-tls",
            False,
            f"cannot establish TLS with the API server (SSLCertVerificationError){NO_TLS}",
        ),
    ),
    (
        "client-unprepared-request",
        ApiException(status=0, reason=f"Cannot prepare a request message for {SECRET_URL}"),
        (
            InternalError,
            "internal-error",
            False,
            "Kubernetes API client: unexpected ApiException; please report it",
        ),
    ),
    (
        "bug",
        ValueError(f"cannot serialize {SECRET_URL}"),
        (
            InternalError,
            "internal-error",
            False,
            "Kubernetes API client: unexpected ValueError; please report it",
        ),
    ),
]


class _FailingApiClient:
    """Stands in for the official client when the transport underneath fails with ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def param_serialize(self, method: str, path: str, **_: Any) -> tuple[Any, ...]:
        return method, f"https://10.0.0.1:6443{path}?token=s3cr3t", {}, None, []

    def call_api(self, *_: Any, **__: Any) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("raised", "expected"),
    [(raised, expected) for _, raised, expected in TRANSPORT_FAILURES],
    ids=[name for name, _, _ in TRANSPORT_FAILURES],
)
def test_a_transport_failure_is_classified_by_its_cause_and_echoes_nothing(
    raised: BaseException, expected: tuple[type[InferCraneError], str, bool, str]
) -> None:
    with pytest.raises(InferCraneError) as error:
        RestTransport(_FailingApiClient(raised)).request("GET", "/version")
    assert the_error(error.value) == expected
    assert error.value.__cause__ is raised
    assert "s3cr3t" not in str(error.value) and "10.0.0.1" not in str(error.value)


def test_an_answer_the_client_raises_is_an_answer_and_an_interruption_is_not_caught() -> None:
    # As the client raises it (the body argument is newer than our lowest client, 31).
    unauthorized = ApiException(status=401)
    unauthorized.body = '{"kind": "Status", "message": "Unauthorized"}'
    answer = RestTransport(_FailingApiClient(unauthorized)).request("GET", "/version")
    assert answer == Response(401, {"kind": "Status", "message": "Unauthorized"})
    with pytest.raises(KeyboardInterrupt):
        RestTransport(_FailingApiClient(KeyboardInterrupt())).request("GET", "/version")


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request with its own record: what the client put on the wire."""

    def do_PATCH(self) -> None:
        sent = self.rfile.read(int(self.headers["Content-Length"]))
        seen = {
            "method": self.command,
            "path": self.path,
            "authorization": self.headers["Authorization"],
            "contentType": self.headers["Content-Type"],
            "body": json.loads(sent),
        }
        answer = json.dumps(seen).encode()
        self.send_response(409 if seen["body"].get("conflict") else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_: Any) -> None:
        """Quiet: the test reads what was sent, not the server's log."""


@pytest.fixture
def recorder() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("conflict", [False, True], ids=["applied", "refused"])
def test_the_installed_client_carries_path_query_auth_and_body_and_brings_the_answer(
    recorder: str, conflict: bool
) -> None:
    # Whichever client is installed: 37 here, 31 in the lowest-versions run (`authorization` is
    # the key both read the token from).
    configuration = Configuration(host=recorder, api_key={"authorization": "Bearer t0ken"})
    transport = RestTransport(ApiClient(configuration))
    body = {"kind": "Service", "conflict": conflict}
    path = "/api/v1/namespaces/a/services/b"
    answer = transport.request(
        "PATCH",
        path,
        query=[("fieldManager", "infercrane-provider-v1"), ("dryRun", "All")],
        body=body,
        content_type="application/apply-patch+yaml",
    )
    assert answer == Response(
        409 if conflict else 200,
        {
            "method": "PATCH",
            "path": f"{path}?fieldManager=infercrane-provider-v1&dryRun=All",
            "authorization": "Bearer t0ken",
            "contentType": "application/apply-patch+yaml",
            "body": body,
        },
    )


class _Scripted:
    """Answers each request with the next response of ``script``; records each query."""

    def __init__(self, script: Sequence[Response]) -> None:
        self.script = list(script)
        self.queries: list[dict[str, str]] = []

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
        self.queries.append(dict(query))
        return self.script.pop(0)


def page(names: Sequence[str], token: str = "") -> Response:
    return Response(
        200,
        {"items": [{"metadata": {"name": n}} for n in names], "metadata": {"continue": token}},
    )


EXPIRED = Response(
    410,
    {
        "kind": "Status",
        "message": "The provided continue parameter is too old to display a consistent list "
        "result.",
        "reason": "Expired",
        "code": 410,
    },
)


def test_an_expired_list_is_read_again_from_its_first_page() -> None:
    # "b" was deleted and "c" created between the two snapshots: only the second one counts.
    transport = _Scripted([page(["a", "b"], "t1"), EXPIRED, page(["a", "c"], "t2"), page(["d"])])
    found = Cluster(transport).metadata(DEPLOYMENT, NS)
    assert found == {name: {"name": name} for name in ("a", "c", "d")}
    assert transport.queries == [
        {"limit": "500"},
        {"limit": "500", "continue": "t1"},
        {"limit": "500"},
        {"limit": "500", "continue": "t2"},
    ]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            [page(["a"], "t"), EXPIRED] * (LIST_RESTARTS + 1),
            (
                ClusterUnavailableError,
                "cluster-unavailable",
                True,
                f"list deployments.apps in {NS}: the list expired 4 times before its last page; "
                "try again",
            ),
        ),
        (
            [EXPIRED],
            (
                RejectedError,
                "rejected",
                False,
                f"list deployments.apps in {NS}: The provided continue parameter is too old to "
                "display a consistent list result.",
            ),
        ),
        (
            [page(["a"], "t"), Response(503, {"message": "etcdserver: request timed out"})],
            (
                ClusterUnavailableError,
                "cluster-unavailable",
                True,
                f"list deployments.apps in {NS}: API server answered 503, try again",
            ),
        ),
        (
            [Response(403, {"message": 'deployments.apps is forbidden: User "u"'})],
            (
                ClusterForbiddenError,
                "cluster-forbidden",
                False,
                f'list deployments.apps in {NS}: deployments.apps is forbidden: User "u"',
            ),
        ),
    ],
    ids=["expired-every-time", "gone-without-a-token", "503-mid-list", "403"],
)
def test_a_list_that_cannot_be_read_whole_fails_by_cause(
    script: list[Response], expected: tuple[type[InferCraneError], str, bool, str]
) -> None:
    transport = _Scripted(script)
    with pytest.raises(InferCraneError) as error:
        Cluster(transport).metadata(DEPLOYMENT, NS)
    assert the_error(error.value) == expected
    assert transport.script == []  # every restart asked again, and none after the last

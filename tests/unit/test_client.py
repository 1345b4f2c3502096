"""The client's error mapping: retryable vs permanent, and nothing echoed from the transport."""

from __future__ import annotations

from typing import Any

import pytest
import urllib3

from infercrane_pulumi.cluster.client import Response, RestTransport, raise_for_status
from infercrane_pulumi.errors import ClusterUnavailableError, RejectedError


def test_server_errors_are_retryable_and_forbidden_is_not() -> None:
    unavailable = Response(503, {"message": "etcdserver: leader changed"})
    with pytest.raises(ClusterUnavailableError) as error:
        raise_for_status(unavailable, "Deployment/ns/x")
    assert error.value.retryable
    forbidden = Response(403, {"message": 'deployments.apps "x" is forbidden'})
    with pytest.raises(RejectedError) as denied:
        raise_for_status(forbidden, "Deployment/ns/x")
    assert not denied.value.retryable


class _ExplodingApiClient:
    """Stands in for the official client when the transport underneath fails."""

    def param_serialize(self, method: str, path: str, **_: Any) -> tuple[Any, ...]:
        return method, f"https://10.0.0.1:6443{path}?token=s3cr3t", {}, None, []

    def call_api(self, *_: Any, **__: Any) -> Any:
        pool = urllib3.HTTPSConnectionPool("10.0.0.1", 6443)
        raise urllib3.exceptions.MaxRetryError(pool, "https://10.0.0.1:6443/?token=s3cr3t")


def test_transport_failures_become_retryable_errors_that_echo_nothing() -> None:
    transport = RestTransport(_ExplodingApiClient())
    with pytest.raises(ClusterUnavailableError) as error:
        transport.request("GET", "/version")
    assert error.value.retryable
    assert "s3cr3t" not in str(error.value)
    assert "10.0.0.1" not in str(error.value)
    assert str(error.value) == (
        "cannot reach the API server (MaxRetryError); check the context and that the cluster is up"
    )

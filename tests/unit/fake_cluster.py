"""A recorded stand-in for the API server, and the sample config the cluster tests share."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from infercrane_pulumi.cluster.client import Response
from infercrane_pulumi.intents import StackConfig, parse_stack_config
from tests.unit import samples

NS = "infercrane-system"


class FakeTransport:
    """Answers by (method, path); records every request in order."""

    def __init__(self, answers: dict[tuple[str, str], Response] | None = None) -> None:
        self.answers = answers or {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Response:
        self.requests.append((method, path, dict(query)))
        if (method, path) in self.answers:
            return self.answers[(method, path)]
        if method == "PATCH":
            return Response(200, body)
        return Response(404, {"kind": "Status", "reason": "NotFound"})


def config(**settings: Any) -> StackConfig:
    return parse_stack_config(samples.kubernetes(**settings), [samples.replica()])


def live_copy(obj: dict[str, Any], managers: list[tuple[str, str]]) -> dict[str, Any]:
    live = copy.deepcopy(obj)
    live["metadata"]["managedFields"] = [
        {"manager": m, "operation": op, "fieldsType": "FieldsV1"} for m, op in managers
    ]
    return live

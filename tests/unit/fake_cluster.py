"""A recorded stand-in for the API server, and the sample config the cluster tests share."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from infercrane_pulumi.cluster.api import Response
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects.kinds import POD
from infercrane_pulumi.objects.workloads import KINDS
from tests.unit import samples

NS = "infercrane-system"
PLURALS = {kind.plural for kind in (*KINDS.values(), POD)}


class FakeTransport:
    """Answers by (method, path), else from ``live`` objects (GET of one, LIST of a
    collection); records every request in order. Dry-run applies succeed by default."""

    def __init__(
        self,
        answers: dict[tuple[str, str], Response] | None = None,
        live: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.answers = answers or {}
        self.live = {
            KINDS[obj["kind"]].path(obj["metadata"]["namespace"], obj["metadata"]["name"]): obj
            for obj in live
        }
        self.requests: list[tuple[str, str, dict[str, str]]] = []

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
        self.requests.append((method, path, dict(query)))
        if (method, path) in self.answers:
            return self.answers[(method, path)]
        if method == "PATCH":
            return Response(200, body)
        if method == "GET" and path in self.live:
            return Response(200, copy.deepcopy(self.live[path]))
        if method == "GET" and path.rsplit("/", 1)[-1] in PLURALS:
            items = [obj for where, obj in self.live.items() if where.rsplit("/", 1)[0] == path]
            return Response(200, {"items": copy.deepcopy(items), "metadata": {}})
        return Response(404, {"kind": "Status", "reason": "NotFound"})


class Deleting(FakeTransport):
    """Deletes what it holds on DELETE (unless ``answers`` says otherwise)."""

    def request(self, method: str, path: str, **kwargs: Any) -> Response:
        answer = super().request(method, path, **kwargs)
        if method == "DELETE" and (method, path) not in self.answers:
            self.live.pop(path, None)
            return Response(200, {})
        return answer


def config(**settings: Any) -> StackConfig:
    return parse_stack_config(samples.kubernetes(**settings), [samples.replica()])


def live_copy(obj: dict[str, Any], managers: list[tuple[str, str]]) -> dict[str, Any]:
    live = copy.deepcopy(obj)
    live["metadata"]["managedFields"] = [
        {"manager": m, "operation": op, "fieldsType": "FieldsV1"} for m, op in managers
    ]
    return live

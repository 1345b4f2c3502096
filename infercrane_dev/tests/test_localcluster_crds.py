"""CRD install helper against a fake ApiextensionsV1Api (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from infercrane_dev.localcluster.crds import (
    CrdError,
    apply_crd,
    is_established,
    load_crds,
    wait_established,
)

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object}}
"""


class FakeApi:
    def __init__(self, *, exists: bool = False, established_after: int = 0) -> None:
        self.exists = exists
        self.reads = 0
        self.established_after = established_after
        self.replaced: list[dict[str, Any]] = []
        self.created: list[dict[str, Any]] = []

    def create_custom_resource_definition(self, body: dict[str, Any]) -> None:
        if self.exists:
            raise ApiException(status=409, reason="AlreadyExists")
        self.created.append(body)

    def replace_custom_resource_definition(self, name: str, body: dict[str, Any]) -> None:
        self.replaced.append(body)

    def read_custom_resource_definition(self, name: str, _preload_content: bool) -> Any:
        self.reads += 1
        status = "True" if self.reads > self.established_after else "False"
        data = {
            "metadata": {"name": name, "resourceVersion": "42"},
            "status": {"conditions": [{"type": "Established", "status": status}]},
        }
        return SimpleNamespace(data=json.dumps(data).encode())


def test_load_crds_accepts_multi_document(tmp_path: Path) -> None:
    path = tmp_path / "crds.yaml"
    path.write_text(CRD + "---\n" + CRD.replace("widgets", "gadgets") + "---\n")
    assert [d["metadata"]["name"] for d in load_crds(path)] == [
        "widgets.example.com",
        "gadgets.example.com",
    ]


@pytest.mark.parametrize(
    "text",
    ["", "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n", "- a\n- b\n"],
)
def test_load_crds_rejects_non_crds(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CrdError):
        load_crds(path)


def test_apply_creates_then_replaces_existing(tmp_path: Path) -> None:
    path = tmp_path / "crd.yaml"
    path.write_text(CRD)
    (document,) = load_crds(path)

    fresh = FakeApi()
    assert apply_crd(fresh, document) == "widgets.example.com"
    assert fresh.created and not fresh.replaced

    existing = FakeApi(exists=True)
    apply_crd(existing, document)
    assert existing.replaced[0]["metadata"]["resourceVersion"] == "42"
    assert "resourceVersion" not in document["metadata"], "caller's document is not mutated"


def test_apply_reports_other_errors(tmp_path: Path) -> None:
    class Forbidden(FakeApi):
        def create_custom_resource_definition(self, body: dict[str, Any]) -> None:
            raise ApiException(status=403, reason="Forbidden")

    path = tmp_path / "crd.yaml"
    path.write_text(CRD)
    with pytest.raises(CrdError, match="403"):
        apply_crd(Forbidden(), load_crds(path)[0])


def test_wait_established_polls_until_true() -> None:
    api = FakeApi(established_after=2)
    wait_established(api, "widgets.example.com", timeout=5, interval=0.01)
    assert api.reads == 3


def test_wait_established_times_out() -> None:
    with pytest.raises(CrdError, match="not Established"):
        wait_established(FakeApi(established_after=10**6), "w", timeout=0.05, interval=0.01)


def test_is_established() -> None:
    assert not is_established({})
    assert not is_established({"status": {"conditions": None}})
    assert is_established({"status": {"conditions": [{"type": "Established", "status": "True"}]}})

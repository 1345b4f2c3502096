"""The architecture, enforced: pure modules stay pure, and each outside world has one door."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "infercrane_pulumi"


def imports(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", ["errors", "intents", "naming", "manifests"])
def test_pure_modules_import_neither_pulumi_nor_a_kubernetes_client(module: str) -> None:
    outside = {
        m
        for m in imports(module)
        if m.split(".")[0] in {"pulumi", "pulumi_kubernetes", "kubernetes"}
    }
    assert outside == set()


def test_only_automation_imports_the_automation_api() -> None:
    users = {m for m in modules() if any(i.startswith("pulumi.automation") for i in imports(m))}
    assert users == {"automation"}


def test_only_kube_talks_to_the_kubernetes_api_in_the_product_modules() -> None:
    clients = {m for m in modules() if any(i.split(".")[0] == "kubernetes" for i in imports(m))}
    assert clients == {"kube"}


def test_pure_and_cluster_layers_never_import_the_pulumi_layer() -> None:
    for module in ("intents", "naming", "manifests", "kube"):
        assert not {
            "infercrane_pulumi.components",
            "infercrane_pulumi.program",
            "infercrane_pulumi.automation",
            "infercrane_pulumi.cli",
        } & imports(module)

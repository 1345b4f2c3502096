"""deploy/kubernetes as Kustomize bases, rendered by kubectl's own Kustomize (the toolchain's
kubectl): each base is exactly the files a namespace of its job applied before there were
bases, and an overlay that sets a namespace and the runner's digest renders what a rewrite of
every ``infercrane-system`` would (the old ``sed`` recipe), the Role naming the namespace
included. The bootstrap of every conformance namespace renders through such an overlay."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster.bootstrap import EXAMPLE_OVERLAY, shipped_objects
from infercrane_dev.toolchain import BinaryNotFoundError, find_binary
from infercrane_pulumi.objects.workloads import WORKLOAD_APIS

SHIPPED = "infercrane-system"
RUNNER_IMAGE = "infercrane.local/infercrane/runner@sha256:" + "0" * 64
# What each base renders: the files a namespace of its job applies.
BASES = {
    "base": ["base/namespace.yaml", "base/service-accounts.yaml", "base/provider-rbac.yaml"],
    "kserve": ["base/namespace.yaml", "base/service-accounts.yaml", "kserve/provider-rbac.yaml"],
    "observe": ["observe/pods-reader.yaml"],
    "runner": ["runner/runner.yaml"],
    "network-policy": ["network-policy/runtime-ingress.yaml"],
    "gateway-api": ["gateway-api/httproute.yaml"],
}


@pytest.fixture(scope="module")
def kubectl() -> Path:
    try:
        return find_binary("kubectl")
    except BinaryNotFoundError as missing:
        reason = f"kubectl missing ({missing}); run `make tools`"
        if os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def kustomize(kubectl: Path, directory: Path) -> list[str]:
    done = subprocess.run(
        [str(kubectl), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return canonical(yaml.safe_load_all(done.stdout))


def canonical(documents: Any) -> list[str]:
    """Documents as a sorted list of JSON texts: the same objects whatever their order."""
    return sorted(json.dumps(doc, sort_keys=True) for doc in documents if doc)


def files(names: list[str], *, namespace: str = SHIPPED) -> list[Any]:
    """The shipped files' documents, ``infercrane-system`` rewritten everywhere to
    ``namespace`` (what ``sed 's/infercrane-system/<ns>/'`` did)."""
    return [
        doc
        for name in names
        for doc in yaml.safe_load_all((DEPLOY_DIR / name).read_text().replace(SHIPPED, namespace))
        if doc
    ]


@pytest.mark.parametrize("base", sorted(BASES))
def test_each_base_renders_exactly_the_files_of_its_job(kubectl: Path, base: str) -> None:
    assert kustomize(kubectl, DEPLOY_DIR / base) == canonical(files(BASES[base]))


def test_every_shipped_file_is_in_a_base() -> None:
    shipped = {
        str(path.relative_to(DEPLOY_DIR))
        for path in DEPLOY_DIR.rglob("*.yaml")
        if path.name != "kustomization.yaml"
    }
    assert shipped == {name for names in BASES.values() for name in names}


def test_the_example_overlay_renders_the_rewrite_of_every_name_and_the_runner_digest(
    kubectl: Path,
) -> None:
    overlay = yaml.safe_load((DEPLOY_DIR / EXAMPLE_OVERLAY).read_text())
    [image] = overlay["images"]
    pushed = f"{image['newName']}@{image['digest']}"
    expected = files(BASES["base"] + BASES["observe"] + BASES["runner"], namespace="tenant-a")
    text = json.dumps(expected).replace(RUNNER_IMAGE, pushed)
    assert text.count(pushed) == 2  # the plugin's init container and the runner
    assert kustomize(kubectl, DEPLOY_DIR / EXAMPLE_OVERLAY.parent) == canonical(json.loads(text))


@pytest.mark.parametrize("api", sorted(WORKLOAD_APIS))
@pytest.mark.parametrize("observe", [False, True], ids=["", "observe"])
def test_a_bootstrap_renders_its_base_for_its_namespace(
    kubectl: Path, api: str, observe: bool
) -> None:
    names = BASES[WORKLOAD_APIS[api].manifests] + (BASES["observe"] if observe else [])  # type: ignore[index]
    rendered = shipped_objects("t-1", workload_api=api, deploy_dir=DEPLOY_DIR, observe=observe)  # type: ignore[arg-type]
    assert canonical(rendered) == canonical(files(names, namespace="t-1"))

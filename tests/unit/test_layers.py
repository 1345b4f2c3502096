"""The architecture, enforced on every module: data flows one way and each outside world has
one door. Layers are ranked; a module may import only product modules of a lower rank. The
dev-only local cluster is not ranked, but its modules may not import one another in a circle.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = "infercrane_pulumi"
DEV = "infercrane_dev"

# Lower ranks know nothing of higher ones. Every product module must be listed.
RANKS = {
    "errors": 0,
    "private_dirs": 0,
    "config": 0,
    "config.validators": 0,
    "config.podsettings": 1,
    "config.intents": 2,
    "intents": 3,  # the old path, re-exported for one release
    "config.rules": 3,
    "config.files": 4,
    "config.kubeconfigs": 3,
    "objects": 0,
    "objects.kinds": 2,
    "objects.naming": 3,
    "objects.podspec": 3,
    "objects.manifests": 4,
    "objects.readiness": 4,
    "objects.workloadapi": 5,
    "objects.deployment": 6,
    "objects.kserve": 6,
    "objects.workloads": 7,
    "program": 0,
    "program.handoff": 4,
    "program.records": 7,
    "program.components": 12,
    "program.program": 14,
    "policy": 2,
    "policy.podsecurity": 3,
    "policy.rules": 8,
    "policy.crossguard": 9,
    "review": 8,
    "review.yamldiff": 8,
    "review.gitrepo": 8,
    "review.renames": 9,
    "review.changes": 10,
    "review.comments": 11,
    "review.offline_diff": 12,
    "cluster": 9,
    "cluster.api": 8,
    "cluster.client": 9,
    "cluster.actions": 9,
    "cluster.preflight": 10,
    "cluster.placement": 10,
    "cluster.desired": 10,
    "cluster.runstatus": 10,
    "cluster.doctor": 12,
    "cluster.observe": 12,
    "cluster.verdict": 11,
    "cluster.deletion": 12,
    "cluster.ownership": 13,
    "hand_run": 15,
    "package": 0,
    "package.schema": 4,
    "package.removal": 16,
    "package.replica": 17,
    "package.server": 18,
    "package.plugin.__main__": 19,  # the plugin's entry point, as the engine runs it
    "automation.state": 0,
    "automation.state.backends": 14,
    "automation.state.fencing": 14,
    "automation.targets": 14,
    "automation.failures": 14,
    "automation.engine.serving": 14,
    "automation.engine.process": 14,
    "automation.engine.events": 14,
    "automation.engine.checkpoints": 14,
    "automation.engine.locks": 14,
    "automation.engine.history": 14,
    "automation.engine.memory": 14,
    "automation.engine.marks": 13,
    "automation.state.s3": 14,
    "automation.engine.operation": 15,
    "automation.engine": 16,
    "automation.environment": 15,
    "automation.pulumi_versions": 15,
    "automation.project": 15,
    "automation.planning": 15,
    "automation.state.leasedb": 15,
    "automation.state.leases": 16,
    "automation.policypack": 17,
    "automation.state.blobs": 16,
    "automation.state.recovery": 17,
    "automation.state.holders": 18,  # the run path's door to the state: over all of it
    "automation.state.retention": 17,
    "automation.stacks": 18,  # recovers a dead run before it selects a stack
    "automation.results": 18,
    "automation.attempt": 19,
    "automation.run": 20,
    "automation.namespaces": 21,
    "automation.stackfiles": 21,
    "automation": 22,
    "cli.views": 23,
    "cli.every": 0,
    "cli.flags": 2,
    "cli.commands": 24,
    "cli.entry": 25,
    "cli": 26,
    "__main__": 27,
}
# The only modules that may open the door to each outside world (product modules only).
DOORS = {
    "kubernetes": {"cluster.client"},
    "psycopg": {"automation.state.leasedb"},
    "grpc": {"automation.engine.serving", "package.server"},
    "pulumi.automation": {
        "automation",
        "automation.attempt",
        "automation.engine.process",
        "automation.engine.operation",
        "automation.environment",
        "automation.engine.events",
        "automation.namespaces",
        "automation.policypack",
        "automation.engine.serving",
        "automation.project",
        "automation.state.holders",
        "automation.state.recovery",
        "automation.results",
        "automation.run",
        "automation.stackfiles",
        "automation.stacks",
    },
}
# The one run path: ``automation.run``, which alone calls ``automation.attempt``, the only
# module that starts an engine operation on a stack.
RUN_PATH = "automation.run"
ENGINE_DISPATCH = "automation.attempt"
ENGINE_OPERATIONS = {"up", "preview", "destroy", "refresh"}
PULUMI_USERS = {
    "program.components",
    "program.program",
    "hand_run",
    "package.removal",
    "package.replica",
    "package.server",
} | DOORS["pulumi.automation"]


def module_name(path: Path, package: str) -> str:
    relative = path.relative_to(ROOT / package).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def product_modules() -> dict[str, Path]:
    return {module_name(p, PRODUCT): p for p in (ROOT / PRODUCT).rglob("*.py")}


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {f"{node.module}.{alias.name}" for alias in node.names}
            # `from package import submodule` imports the submodule, not the package's init.
            submodules = {n for n in names if n.removeprefix(f"{PRODUCT}.") in RANKS}
            found |= names if submodules else names | {node.module}
    return found


def internal(names: set[str]) -> set[str]:
    """Product modules among ``names``, relative to the package (``cluster.client``)."""
    known = set(RANKS) - {""}
    return {n.removeprefix(f"{PRODUCT}.") for n in names if n.startswith(f"{PRODUCT}.")} & known


def test_every_product_module_has_a_layer() -> None:
    assert set(product_modules()) - {""} == set(RANKS)


@pytest.mark.parametrize("module", sorted(RANKS))
def test_a_module_imports_only_lower_layers(module: str) -> None:
    path = product_modules()[module]
    upward = {m for m in internal(imports(path)) if RANKS[m] >= RANKS[module] and m != module}
    # A package may re-export its own submodules.
    upward = {m for m in upward if not m.startswith(f"{module}.")}
    assert upward == set()


@pytest.mark.parametrize("world", sorted(DOORS))
def test_each_outside_world_has_one_door(world: str) -> None:
    users = {
        module
        for module, path in product_modules().items()
        if any(name == world or name.startswith(f"{world}.") for name in imports(path))
    }
    assert users and users <= DOORS[world]


# One module per workload API: it alone names its kinds and its API; everyone else asks the
# table (``objects.workloads``). The kinds are defined as data in ``objects.kinds``, and the
# API names a configuration may give are listed in ``config.intents``.
WORKLOAD_API_MODULES = {"objects.deployment", "objects.kserve"}
WORKLOAD_KINDS = {
    "DEPLOYMENT": "Deployment",
    "SERVICE": "Service",
    "INFERENCE_SERVICE": "InferenceService",
}
WORKLOAD_API_NAMES = {"deployment", "kserve"}


def names_a_workload_api(path: Path) -> set[str]:
    """The workload kinds ``path`` imports, and the kind or API names its code spells out."""
    spelled = {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and node.value in {*WORKLOAD_KINDS.values(), *WORKLOAD_API_NAMES}
    }
    imported = {name.rsplit(".", 1)[-1] for name in imports(path) if ".objects.kinds." in name}
    return spelled | (imported & set(WORKLOAD_KINDS))


def test_only_a_workload_api_s_module_names_its_kinds() -> None:
    allowed = WORKLOAD_API_MODULES | {"objects.kinds", "config.intents"}
    named = {
        module: names_a_workload_api(path)
        for module, path in product_modules().items()
        if module not in allowed
    }
    assert {module: found for module, found in named.items() if found} == {}
    # The rule sees what it looks for: each API's module names its kinds and its API.
    assert all(names_a_workload_api(product_modules()[m]) for m in WORKLOAD_API_MODULES)


def test_only_the_pulumi_layer_imports_pulumi() -> None:
    users = {
        module
        for module, path in product_modules().items()
        if any(name.split(".")[0] in {"pulumi", "pulumi_kubernetes"} for name in imports(path))
    }
    assert users and users <= PULUMI_USERS


def engine_calls(path: Path) -> list[str]:
    """What in a module could start an engine operation on a stack: ``x.up(...)`` and friends
    on anything but ``self`` (the Automation API's ``Stack``), and a Pulumi CLI command line
    spelled out (a list or tuple starting with the operation, as the run path's own)."""
    found = []
    tree = ast.parse(path.read_text())
    # A ``Literal["up", ...]`` type names operations; it starts none.
    types = {
        id(node.slice)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Literal"
    }
    for node in ast.walk(tree):
        if id(node) in types:
            continue
        if isinstance(node, ast.List | ast.Tuple) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value in ENGINE_OPERATIONS:
                found.append(f"line {node.lineno}: pulumi {first.value} …")
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in ENGINE_OPERATIONS
                and not (isinstance(func.value, ast.Name) and func.value.id == "self")
            ):
                found.append(f"line {node.lineno}: .{func.attr}(...)")
    return found


def test_one_run_path_starts_every_engine_operation() -> None:
    """The architecture (docs/explanation/run-path.md): every driver runs through
    ``automation.run``; the suite's conftest enforces the same at run time for every test and dev
    helper."""
    modules = product_modules()
    callers = {m: engine_calls(p) for m, p in modules.items() if m != ENGINE_DISPATCH}
    assert {m: calls for m, calls in callers.items() if calls} == {}
    assert engine_calls(modules[ENGINE_DISPATCH])  # the dispatch is still there
    dispatchers = {m for m, p in modules.items() if f"{PRODUCT}.{ENGINE_DISPATCH}" in imports(p)}
    assert dispatchers == {RUN_PATH}


def test_the_product_never_imports_dev_tooling_tests_or_benchmarks() -> None:
    for module, path in product_modules().items():
        outside = {n for n in imports(path) if n.split(".")[0] in {DEV, "tests", "benchmarks"}}
        assert outside == set(), module


def package_imports(package: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``package`` (among ``modules``) that ``path`` imports, anywhere in it:
    an import inside a function closes a circle all the same."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            inside = [a.name for a in node.names if a.name.startswith(f"{package}.")]
            found |= {name.removeprefix(f"{package}.").split(".")[0] for name in inside}
        elif isinstance(node, ast.ImportFrom) and (
            node.level == 1 or (node.module or "").startswith(package)
        ):
            module = (node.module or "").removeprefix(package).lstrip(".")
            # `from .certs import X` imports certs; `from . import certs` too.
            found |= {module.split(".")[0]} if module else {a.name for a in node.names}
    return found & modules


@pytest.mark.parametrize(
    ("package", "lifecycle"), [("localcluster", "controlplane"), ("kind", "cluster")]
)
def test_dev_cluster_modules_import_one_way(package: str, lifecycle: str) -> None:
    """No import circle among the modules of the local cluster, or of the Kind tooling, so each
    component module (kubelet, apiserver, the node image, ...) can be read and grown without
    the lifecycle that starts it."""
    paths = {p.stem: p for p in (ROOT / DEV / package).glob("*.py")}
    graph = {
        name: package_imports(f"{DEV}.{package}", path, set(paths)) for name, path in paths.items()
    }

    assert len(graph) > 8 and graph[lifecycle]  # the walk finds the package's imports
    assert circled(graph) == set()


def dev_units() -> dict[str, list[Path]]:
    """The dev package's parts: each subpackage (its files) and each top-level module."""
    units = {p.stem: [p] for p in (ROOT / DEV).glob("*.py") if p.stem != "__init__"}
    for package in (ROOT / DEV).iterdir():
        if (package / "__init__.py").is_file() and package.name != "tests":
            units[package.name] = sorted(package.rglob("*.py"))
    return units


def dev_unit_imports(path: Path, units: set[str]) -> set[str]:
    """The dev package's parts that ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {n.split(".")[1] for n in names if n.startswith(f"{DEV}.") and "." in n}
    return found & units


def test_the_dev_package_s_parts_import_one_way() -> None:
    """No import circle among the dev package's parts (the local cluster, Kind, the images,
    the state stores, the demo ...): each can be read, and imported, without the ones that
    use it."""
    units = dev_units()
    graph = {
        name: set().union(*(dev_unit_imports(path, set(units)) for path in paths)) - {name}
        for name, paths in units.items()
    }
    assert graph["localcluster"] and graph["kind"]  # the walk finds the parts' imports
    assert circled(graph) == set()


def circled(graph: dict[str, set[str]]) -> set[str]:
    """The nodes of ``graph`` that reach themselves."""

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += graph[name]
        return seen

    return {name for name in graph if name in reachable(name)}


def test_the_wheel_ships_the_typed_product_only_with_ranges_and_no_dev_dependency(
    tmp_path: Path,
) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=120,
        env=os.environ | {"PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
    packages = {name.split("/")[0] for name in names if not name.endswith(".dist-info/RECORD")}
    assert {p for p in packages if not p.endswith(".dist-info")} == {PRODUCT}
    # What users install is the ranges pyproject declares (no exact pin), and nothing of dev.
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(map(str, map(Requirement, requires))) == sorted(
        map(str, map(Requirement, declared))
    )
    assert not [r for r in requires if "==" in r]
    # Typed for mypy --strict users of NamespaceStack, with the JSON schemas of the envelope.
    schemas = sorted(p.name for p in (ROOT / PRODUCT / "schemas").glob("*.json"))
    assert f"{PRODUCT}/py.typed" in names
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith(f"{PRODUCT}/schemas/")) == (
        schemas
    )
    assert not [n for n in names if "localcluster" in n or "demo" in n]

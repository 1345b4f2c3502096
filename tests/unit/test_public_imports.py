"""Every import path a user is shown imports: each one the documentation, the README and the
examples name, and each old path the changelog says is re-exported (its other rows name paths
that are gone, so it is read only for those). And every program the repository holds in a
string (a probe run in a Pod, a process a test starts) imports what exists."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "infercrane_pulumi"
SHOWN = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
SHOWN += sorted((ROOT / "examples").glob("*.py"))
# ``from infercrane_pulumi.x import A, B`` (one line or parenthesized) and dotted names in text.
FROM_IMPORT = re.compile(r"from (infercrane_pulumi[\w.]*) import \(?([\w\s,]+?)\)?\s*$", re.M)
DOTTED = re.compile(r"\binfercrane_pulumi(?:\.\w+)+")
# The changelog's re-exported old paths: "`old` | `new` (the old path re-exports it ...)".
REEXPORTED = re.compile(
    r"\| `(infercrane_pulumi[\w.]*)` \| `(infercrane_pulumi[\w.]*)` \(the old path re-exports"
)


def shown_names() -> set[tuple[str, str]]:
    """(module, attribute) pairs; an attribute of "" is the module itself."""
    found: set[tuple[str, str]] = set()
    for path in SHOWN:
        text = path.read_text()
        for module, names in FROM_IMPORT.findall(text):
            found |= {(module, n.strip()) for n in names.split(",") if n.strip()}
        for dotted in DOTTED.findall(text):
            found.add(_split(dotted))
    return found


def _split(dotted: str) -> tuple[str, str]:
    """The longest importable module of ``dotted``, and the attribute after it ("" if none)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            importlib.import_module(module)
        except ModuleNotFoundError:
            continue
        return module, ".".join(parts[cut:])
    raise AssertionError(f"{dotted}: no module of it imports")


def test_the_documents_show_the_public_paths() -> None:
    # The walk finds what the README shows a control plane (the collector is not blind).
    assert ("infercrane_pulumi.automation", "NamespaceStack") in shown_names()
    assert ("infercrane_pulumi.config.intents", "ReplicaIntent") in shown_names()


@pytest.mark.parametrize(("module", "attribute"), sorted(shown_names()))
def test_a_shown_path_imports(module: str, attribute: str) -> None:
    value: object = importlib.import_module(module)
    for part in filter(None, attribute.split(".")):
        assert hasattr(value, part), f"{module}.{attribute}: no {part}"
        value = getattr(value, part)


def test_a_moved_module_s_old_path_re_exports_every_public_name() -> None:
    pairs = REEXPORTED.findall((ROOT / "CHANGELOG.md").read_text())
    assert pairs  # the changelog names at least the one kept path
    for old, new in pairs:
        moved, kept = importlib.import_module(new), importlib.import_module(old)
        public = {n for n in vars(moved) if not n.startswith("_")}
        assert {n: getattr(kept, n, None) for n in public} == {n: vars(moved)[n] for n in public}


def test_the_command_s_entry_point_loads() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {
        name: EntryPoint(name, value, "console_scripts").load() for name, value in scripts.items()
    } == {"infercrane-pulumi": importlib.import_module("infercrane_pulumi.cli.entry").main}


def embedded_programs() -> list[tuple[str, ast.Module]]:
    """Python programs held in strings of the repository's own code (a probe a test runs in a
    Pod, a holder it starts as another process): each one that imports the package."""
    found = []
    for path in sorted({*ROOT.glob("tests/**/*.py"), *ROOT.glob("infercrane_dev/**/*.py")}):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                try:
                    program = ast.parse(node.value)
                except SyntaxError:
                    continue
                imports = any(isinstance(n, ast.ImportFrom | ast.Import) for n in ast.walk(program))
                if imports and PACKAGE in node.value:
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", program))
    return found


EMBEDDED = dict(embedded_programs())


def test_the_embedded_programs_are_found() -> None:
    assert any(where.startswith("tests/conformance/test_kind.py") for where in EMBEDDED)


@pytest.mark.parametrize("where", sorted(EMBEDDED))
def test_an_embedded_program_s_imports_and_module_attributes_exist(where: str) -> None:
    """What such a program imports exists, and so does each attribute it reads of a module it
    imported: a moved module or name fails here, not in the Pod that runs the program."""
    program = EMBEDDED[where]
    modules: dict[str, object] = {}
    for node in ast.walk(program):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            source = importlib.import_module(str(node.module))
            for alias in node.names:
                value = getattr(source, alias.name, None)
                if value is None:
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                modules[alias.asname or alias.name] = value
    used = {
        (node.value.id, node.attr)
        for node in ast.walk(program)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }
    missing = [
        f"{name}.{attr}"
        for name, attr in sorted(used)
        if name in modules
        and isinstance(modules[name], ModuleType)
        and not hasattr(modules[name], attr)
    ]
    assert missing == [], where

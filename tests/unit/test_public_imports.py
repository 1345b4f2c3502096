"""Every import path a user is shown imports: each one the documentation, the README and the
examples name, and each old path the changelog says is re-exported (its other rows name paths
that are gone, so it is read only for those)."""

from __future__ import annotations

import importlib
import re
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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

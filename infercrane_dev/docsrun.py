"""The documentation's code blocks as tests: a page that drifts from the code fails.

Every ``sh`` and ``python`` block in ``docs/`` and the README carries a marker in the HTML
comment on the line before it (invisible in the built site), which says what the tests do with
it:

- ``<!-- docs-test: run -->``: a step of the page's tutorial. The page's steps run in order in
  one bash process (``tutorial_script``), so each sees what the previous ones exported; a
  ``python`` step runs as ``python -`` in that shell;
- ``<!-- docs-test: cleanup -->``: run when the steps end, whether they failed or not (stopping
  what a step started);
- ``<!-- docs-test: illustrative -->``: placeholders or an environment the tests do not have
  (another cluster, a secret manager); never run.

Every ``python`` block, whatever its marker, must compile and import only names that exist
(``import_problems``). A block of another language needs no marker and is never run.

This module only reads pages and builds the script: the tests run it
(``tests/conformance/test_tutorials.py``) and check the rules (``infercrane_dev/tests``).
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Marker = Literal["run", "cleanup", "illustrative"]
MARKERS: tuple[Marker, ...] = ("run", "cleanup", "illustrative")
# Languages whose blocks must say what the tests do with them.
CHECKED_LANGUAGES = ("sh", "python")

_MARKER = re.compile(r"^\s*<!-- docs-test: (?P<marker>[a-z]+) -->\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,})(?P<lang>[\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    marker: str | None  # as written: checked against MARKERS by ``problems``
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of one Markdown page, with the marker written before each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        previous = lines[index - 1] if index else ""
        marked = _MARKER.match(previous)
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line
            for line in lines[index + 1 : end]
        ]
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=opening["lang"],
                marker=marked["marker"] if marked else None,
                code="\n".join(body) + "\n",
            )
        )
        index = end + 1
    return found


def problems(block: Block) -> list[str]:
    """Why a block breaks the marker rules (empty: it keeps them)."""
    if block.marker is not None and block.marker not in MARKERS:
        return [f"{block.where}: unknown marker {block.marker!r} (one of {', '.join(MARKERS)})"]
    if block.language in CHECKED_LANGUAGES and block.marker is None:
        return [
            f"{block.where}: a {block.language} block without a marker: put "
            f"<!-- docs-test: run|cleanup|illustrative --> on the line before it"
        ]
    return []


def import_problems(block: Block) -> list[str]:
    """A Python block that does not compile, or imports a module or name that does not exist."""
    try:
        tree = ast.parse(block.code, filename=block.where)
    except SyntaxError as error:
        return [f"{block.where}: does not compile: {error.msg} (block line {error.lineno})"]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _missing(block, alias.name, None)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            for alias in node.names:
                found += _missing(block, node.module, alias.name)
    return found


def _missing(block: Block, module: str, name: str | None) -> list[str]:
    try:
        imported = importlib.import_module(module)
    except ImportError as error:
        return [f"{block.where}: imports {module}, which does not import: {error}"]
    if name is not None and name != "*" and not hasattr(imported, name):
        return [f"{block.where}: imports {name} from {module}, which has no such name"]
    return []


def _step(block: Block, number: int) -> str:
    """One step of the script: a banner naming where it is written, then the block itself."""
    banner = f"echo {shlex.quote(f'==> docs step {number}: {block.where}')} >&2"
    if block.language == "python":
        # A quoted here-document: the shell expands nothing inside the Python code.
        return f"{banner}\npython - <<'DOCS_TEST_PYTHON'\n{block.code}DOCS_TEST_PYTHON\n"
    return f"{banner}\n{block.code}"


def tutorial_script(page_blocks: Sequence[Block]) -> str:
    """The page's ``run`` blocks as one bash script that stops at the first failing command;
    its ``cleanup`` blocks run at exit either way, each command whatever the last one did."""
    steps = [b for b in page_blocks if b.marker == "run"]
    cleanups = [b for b in page_blocks if b.marker == "cleanup"]
    if not steps:
        raise ValueError(f"{page_blocks[0].page if page_blocks else 'page'}: no run blocks")
    cleanup_body = "".join(f"{block.code}" for block in cleanups) or ":\n"
    parts = [
        "set -euo pipefail\n",
        f"docs_cleanup() {{\n  set +e\n{cleanup_body}}}\n",
        "trap docs_cleanup EXIT\n",
        *(_step(block, number) for number, block in enumerate(steps, start=1)),
    ]
    return "\n".join(parts)

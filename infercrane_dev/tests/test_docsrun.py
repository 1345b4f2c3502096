"""The documentation's code blocks, the README's included: every one says what the tests do
with it, every Python block compiles and imports only what exists, and a tutorial's steps
become one script that stops at the first failure and still cleans up. The tutorials themselves
run against the local control plane in tests/conformance/test_tutorials.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from infercrane_dev import docsrun

ROOT = Path(__file__).resolve().parents[2]
# The README's examples are held to the same rules as the pages'.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [block for page in PAGES for block in docsrun.blocks(page)]
PYTHON = [block for block in BLOCKS if block.language == "python"]


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, check=False, timeout=30
    )


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.where)
def test_every_block_of_the_docs_keeps_the_marker_rules(block: docsrun.Block) -> None:
    assert docsrun.problems(block) == []


@pytest.mark.parametrize("block", PYTHON, ids=lambda block: block.where)
def test_every_python_block_of_the_docs_compiles_and_imports_what_exists(
    block: docsrun.Block,
) -> None:
    assert docsrun.import_problems(block) == []


def test_blocks_are_read_with_their_marker_language_line_and_code(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        "# Title\n\n<!-- docs-test: run -->\n```sh\necho one\n```\n\n"
        "1. a list item\n\n    <!-- docs-test: illustrative -->\n    ```python\n"
        "    x = 1\n    ```\n\n```yaml\na: b\n```\n",
    )
    assert docsrun.blocks(page) == [
        docsrun.Block(page=page, line=4, language="sh", marker="run", code="echo one\n"),
        docsrun.Block(page=page, line=11, language="python", marker="illustrative", code="x = 1\n"),
        docsrun.Block(page=page, line=15, language="yaml", marker=None, code="a: b\n"),
    ]


def test_an_unmarked_shell_block_and_an_unknown_marker_are_named(tmp_path: Path) -> None:
    page = _page(tmp_path, "```sh\nls\n```\n\n<!-- docs-test: maybe -->\n```text\nx\n```\n")
    assert [docsrun.problems(block) for block in docsrun.blocks(page)] == [
        [
            f"{page}:1: a sh block without a marker: put "
            "<!-- docs-test: run|cleanup|illustrative --> on the line before it"
        ],
        [f"{page}:6: unknown marker 'maybe' (one of run, cleanup, illustrative)"],
    ]


def test_a_python_block_that_drifted_from_the_code_is_named(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        "```python\nfrom infercrane_pulumi.automation import NamespaceStack, NoSuchThing\n```\n"
        "```python\nimport infercrane_pulumi.no_such_module\n```\n"
        "```python\nstack.ensure(\n```\n",
    )
    found = [docsrun.import_problems(block) for block in docsrun.blocks(page)]
    assert found[0] == [
        f"{page}:1: imports NoSuchThing from infercrane_pulumi.automation, which has no such name"
    ]
    assert found[1] == [
        f"{page}:4: imports infercrane_pulumi.no_such_module, which does not import: "
        "No module named 'infercrane_pulumi.no_such_module'"
    ]
    assert found[2] == [f"{page}:7: does not compile: '(' was never closed (block line 1)"]


def test_a_tutorial_script_runs_its_steps_in_one_shell_and_cleans_up_after_a_failure(
    tmp_path: Path,
) -> None:
    page = _page(
        tmp_path,
        '<!-- docs-test: run -->\n```sh\nexport GREETING=hello\necho "$GREETING" > seen\n```\n'
        "<!-- docs-test: cleanup -->\n```sh\nfalse\necho cleaned >> seen\n```\n"
        '<!-- docs-test: run -->\n```python\nimport os\nprint(os.environ["GREETING"])\n```\n'
        "<!-- docs-test: run -->\n```sh\nfalse\necho never >> seen\n```\n"
        "<!-- docs-test: illustrative -->\n```sh\necho illustrative >> seen\n```\n",
    )
    done = _run(docsrun.tutorial_script(docsrun.blocks(page)), tmp_path)
    assert done.returncode == 1
    assert done.stdout == "hello\n"
    assert done.stderr.splitlines() == [
        f"==> docs step 1: {page}:2",
        f"==> docs step 2: {page}:12",
        f"==> docs step 3: {page}:17",
    ]
    # The failing step stopped the script; the cleanup ran all the same, past its own failure.
    assert (tmp_path / "seen").read_text() == "hello\ncleaned\n"


def test_a_page_without_steps_has_no_script(tmp_path: Path) -> None:
    page = _page(tmp_path, "<!-- docs-test: illustrative -->\n```sh\nls\n```\n")
    with pytest.raises(ValueError, match="no run blocks"):
        docsrun.tutorial_script(docsrun.blocks(page))

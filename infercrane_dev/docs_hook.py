"""MkDocs hook (``hooks:`` in mkdocs.yml): adds the generated reference pages to the build.

The pages exist only in the build's memory: nothing generated is written into ``docs/`` or
committed, so no page can lag behind the code, and ``mkdocs serve`` regenerates them on every
rebuild. The generation itself is ``docsgen``; this file is only the door MkDocs calls.
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from infercrane_dev import docsgen


def on_files(files: Files, config: Any) -> Files:
    for path, text in docsgen.product_pages().items():
        files.append(File.generated(config, path, content=text))
    return files

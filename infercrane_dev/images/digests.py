"""The committed image digests (``digests.json``) and a build's record in the same shape.

The file is what every machine with the pinned toolchain must build: a test compares a fresh
build with it, and ``python -m infercrane_dev.images --record`` rewrites it after a deliberate
change (new binaries, a catalog edit). One platform is recorded: the one it was built on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from .build import BuiltImage
from .ocilayout import Platform

DIGESTS_FILE = Path(__file__).with_name("digests.json")


class DigestRecord(TypedDict):
    platform: str
    tag: str
    images: dict[str, str]


def record(images: Sequence[BuiltImage], platform: Platform) -> DigestRecord:
    tags = {image.tag for image in images}
    if len(tags) != 1:
        raise ValueError(f"one tag expected across the images, got {sorted(tags)}")
    return {
        "platform": f"{platform.os}/{platform.architecture}",
        "tag": tags.pop(),
        "images": {image.name: image.digest for image in images},
    }


def committed() -> DigestRecord:
    loaded: DigestRecord = json.loads(DIGESTS_FILE.read_text())
    return loaded


def write(digests: DigestRecord) -> None:
    DIGESTS_FILE.write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")

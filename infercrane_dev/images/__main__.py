"""Command line: ``python -m infercrane_dev.images [--out DIR] [--json] [--record] [--runner]``.

Builds every image from the tools bin dir, prints name, tag, digest, reference and archive, and
compares the digests with the committed ``digests.json`` (``--record`` rewrites that file
instead). ``--runner`` builds the runner image of this checkout instead (:mod:`.runner`: its
digest changes with the product, so none is committed). Exit codes: 0 built (and matching), 1
failed or differing, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from infercrane_dev import REPO_ROOT
from infercrane_dev.toolchain import BinaryNotFoundError, find_binary

from . import digests
from .build import ImageBuildError, build_images, host_platform
from .debs import DebError
from .runner import build_runner

DEFAULT_OUT = Path(".infercrane") / "images"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infercrane_dev.images")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--record", action="store_true", help="rewrite the committed digests")
    parser.add_argument(
        "--runner", action="store_true", help="the runner image of this checkout, only"
    )
    args = parser.parse_args(argv)
    try:
        if args.runner:
            out = args.out.resolve()
            bin_dir = find_binary("pulumi").parent
            runner = build_runner(bin_dir, REPO_ROOT, out_dir=out, deb_cache=out / "debs")
            print(f"{runner.name}:{runner.tag}  {runner.reference}  {runner.archive}")
            return 0
        bin_dir = find_binary("infercrane-standin").parent
        images = build_images(bin_dir, args.out.resolve())
    except (BinaryNotFoundError, ImageBuildError, DebError) as failed:
        print(f"images: {failed}", file=sys.stderr)
        return 1
    if args.json:
        rows = [
            {
                "name": i.name,
                "tag": i.tag,
                "digest": i.digest,
                "reference": i.reference,
                "archive": str(i.archive),
            }
            for i in images
        ]
        print(json.dumps(rows, indent=2))
    else:
        for image in images:
            print(f"{image.name}:{image.tag}  {image.reference}  {image.archive}")
    built = digests.record(images, host_platform())
    if args.record:
        digests.write(built)
        print(f"recorded in {digests.DIGESTS_FILE}", file=sys.stderr)
        return 0
    if built != digests.committed():
        print(f"images: the digests differ from {digests.DIGESTS_FILE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

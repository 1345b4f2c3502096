"""The refusal channel: how the Pulumi program tells its driver *why* it refused, as data.

The program runs in another process (under the Pulumi CLI and language host), so a refusal
would otherwise reach the Automation API only as engine text. The driver names a file in
``INFERCRANE_REFUSAL_FILE``; the program writes the error's record there before failing the
run, and the driver decodes it through the error registry. Plain ``pulumi up`` sets no file and
reads the human message instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from infercrane_pulumi.errors import InferCraneError, from_record

REFUSAL_FILE_ENV = "INFERCRANE_REFUSAL_FILE"


def report(error: InferCraneError, environ: Mapping[str, str] = os.environ) -> None:
    """Write ``error``'s record where the driver asked (no-op when it asked for none)."""
    target = environ.get(REFUSAL_FILE_ENV)
    if not target:
        return
    path = Path(target)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(error.to_record()), encoding="utf-8")
    partial.replace(path)  # the driver never reads half a record


def take(path: Path) -> InferCraneError | None:
    """The refusal the program reported at ``path`` (consumed), or None if it reported none."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError:
        record = {}
    finally:
        path.unlink(missing_ok=True)
    return from_record(record if isinstance(record, dict) else {})

"""The file backend's stack checkpoint, read as data: a stack's outputs without a CLI process.

Pulumi's DIY backend on a local directory (project-scoped layout) keeps each stack's latest
state in one file, ``.pulumi/stacks/<project>/<stack>.json``, and replaces it whole on every
write (written aside, then renamed), so one read is one version, as the CLI's own read is. Its
outputs are those of the root ``pulumi:pulumi:Stack`` resource. Asking the CLI instead
(``pulumi stack output``) starts a process that loads the whole state: a verified no-op of one
intent took 0.43 s that way, 0.02 s this way.

Anything this reader does not positively understand answers ``None``, and the caller asks the
CLI: another backend, a URL with parameters, a compressed checkpoint (``PULUMI_DIY_BACKEND_GZIP``
or ``_ZSTD``, or both forms present), another schema version, unreadable JSON, a checkpoint
without a latest deployment or without its resources (a new stack, a destroyed one: the CLI
says what they hold), resources without the root stack, and outputs holding any value of
Pulumi's own kinds (a secret, an asset, a resource reference), which only the CLI decodes.
Unknown never reads as empty: a caller that took "no outputs" for "nothing applied" would keep
nothing.

``components`` reads a deployment as the CLI exports it (``pulumi stack export``): which
components of one type the engine's state holds, whether or not the outputs record them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

CHECKPOINT_VERSION = 3
ROOT_TYPE = "pulumi:pulumi:Stack"
# The key that marks a value of Pulumi's own kinds in serialized properties.
SPECIAL_VALUE_KEY = "4dabf18193072939515e22adb298388d"
_COMPRESSED = (".json.gz", ".json.zst")


def outputs(backend_url: str | None, project: str, stack_name: str) -> dict[str, Any] | None:
    """The stack's outputs as ``pulumi stack output --json --show-secrets`` prints them, or
    ``None`` when only the CLI can tell."""
    directory = _local_directory(backend_url)
    if directory is None:
        return None
    stacks = directory / ".pulumi" / "stacks" / project
    if any((stacks / f"{stack_name}{suffix}").exists() for suffix in _COMPRESSED):
        return None
    try:
        content = json.loads((stacks / f"{stack_name}.json").read_bytes())
    except (OSError, ValueError):
        return None
    return _root_outputs(content)


def _local_directory(backend_url: str | None) -> Path | None:
    if backend_url is None:
        return None
    parts = urlsplit(backend_url)
    if parts.scheme != "file" or parts.netloc or parts.query or not parts.path:
        return None
    return Path(unquote(parts.path))


def _root_outputs(content: Any) -> dict[str, Any] | None:
    if not isinstance(content, dict) or content.get("version") != CHECKPOINT_VERSION:
        return None
    checkpoint = content.get("checkpoint")
    latest = checkpoint.get("latest") if isinstance(checkpoint, dict) else None
    resources = latest.get("resources") if isinstance(latest, dict) else None
    if not isinstance(resources, list):
        return None
    # The first root stack resource, as the CLI takes it.
    root = next(
        (
            r
            for r in resources
            if isinstance(r, dict) and r.get("type") == ROOT_TYPE and not r.get("parent")
        ),
        None,
    )
    if root is None:
        return {} if not resources else None
    found = root.get("outputs") or {}
    if not isinstance(found, dict) or _special(found):
        return None
    return found


def components(deployment: Any, type_token: str) -> frozenset[str] | None:
    """The names of the resources of ``type_token`` a deployment exported by the CLI holds
    (it leaves out an empty list of resources); None: not a deployment this reader knows."""
    if not isinstance(deployment, dict):
        return None
    resources = deployment.get("resources", [])
    if not isinstance(resources, list) or not all(isinstance(r, dict) for r in resources):
        return None
    urns = [r.get("urn") for r in resources if r.get("type") == type_token]
    if not all(isinstance(urn, str) and "::" in urn for urn in urns):
        return None
    return frozenset(str(urn).rsplit("::", 1)[1] for urn in urns)


def _special(value: Any) -> bool:
    """Whether ``value`` holds a value of Pulumi's own kinds anywhere."""
    if isinstance(value, dict):
        return SPECIAL_VALUE_KEY in value or any(_special(v) for v in value.values())
    if isinstance(value, list):
        return any(_special(v) for v in value)
    return False

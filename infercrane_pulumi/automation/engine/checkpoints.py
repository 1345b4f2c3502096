"""The file backend's stack checkpoint, read as data: a stack's outputs without a CLI process.

Pulumi's DIY backend on a local directory (project-scoped layout) keeps each stack's latest
state in one file, ``.pulumi/stacks/<project>/<stack>.json``, and replaces it whole on every
write (written aside, then renamed), so one read is one version, as the CLI's own read is. Its
outputs are those of the root ``pulumi:pulumi:Stack`` resource. Asking the CLI instead
(``pulumi stack output``) starts a process that loads the whole state: a verified no-op of one
intent took 0.43 s that way, 0.02 s this way.

Anything this reader does not positively understand answers ``None``, and the caller asks the
CLI: another backend, a URL with parameters, a compressed checkpoint (``PULUMI_DIY_BACKEND_GZIP``
or ``_ZSTD``, or both forms present), another schema version (or version 4 naming a feature
but ``hooks``), unreadable JSON, a checkpoint
without a latest deployment or without its resources (a new stack, a destroyed one: the CLI
says what they hold), resources without the root stack, and outputs holding any value of
Pulumi's own kinds (a secret, an asset, a resource reference), which only the CLI decodes.
Unknown never reads as empty: a caller that took "no outputs" for "nothing applied" would keep
nothing.

``components`` reads a deployment as the CLI exports it (``pulumi stack export``): which
components of one type the engine's state holds, whether or not the outputs record them.

One write, for recovery only and under a lock of its own that keeps every CLI off the stack
(``locks.own_lock``): ``clear_pending_operations`` empties the interrupted operations of a
checkpoint it knows, written aside and renamed as the CLI writes it. The CLI itself cannot:
every command that writes a DIY stack's state takes the stack's lock first, and refuses while
ours is there.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

CHECKPOINT_VERSION = 3
# Version 4 is version 3 naming the features its state uses, which an older CLI would not
# know: the components' delete hooks (``program.DELETE_HOOK``) make every stack's state
# version 4 with ``hooks``, a feature that changes nothing this reader reads. Any other
# feature is unknown here: the CLI reads that state.
FEATURES_VERSION = 4
KNOWN_FEATURES = frozenset({"hooks"})
ROOT_TYPE = "pulumi:pulumi:Stack"
# The key that marks a value of Pulumi's own kinds in serialized properties.
SPECIAL_VALUE_KEY = "4dabf18193072939515e22adb298388d"
_COMPRESSED = (".json.gz", ".json.zst")
ATTRIBUTES = ".attrs"  # the blob driver's attributes file, beside each file it writes


def outputs(backend_url: str | None, project: str, stack_name: str) -> dict[str, Any] | None:
    """The stack's outputs as ``pulumi stack output --json --show-secrets`` prints them, or
    ``None`` when only the CLI can tell."""
    directory = _local_directory(backend_url)
    if directory is None:
        return None
    read = _read(directory, project, stack_name)
    return None if read is None else _root_outputs(read[2])


def drop_torn_attributes(state_dir: Path, project: str, stack_name: str) -> bool:
    """Remove the checkpoint's blob attributes when a write killed midway left them torn (empty
    or not a JSON object); whether it did. The blob driver writes them before it renames the
    new checkpoint into place, so torn ones sit beside the previous checkpoint, which the
    driver then refuses to read (``failed to load checkpoint: EOF``, on every later run) and
    reads alike without them. Only while holding the stack (``locks.own_lock``)."""
    attributes = state_dir / ".pulumi" / "stacks" / project / f"{stack_name}.json{ATTRIBUTES}"
    try:
        content = json.loads(attributes.read_bytes())
    except FileNotFoundError:
        return False
    except ValueError:
        content = None
    if isinstance(content, dict):
        return False
    attributes.unlink()
    return True


def clear_pending_operations(state_dir: Path, project: str, stack_name: str) -> int | None:
    """Empty the interrupted operations of the stack's checkpoint in ``state_dir``; how many
    there were, or ``None`` when the checkpoint is not one this module knows (nothing is then
    written). Only while holding the stack (``locks.own_lock``), with no other holder."""
    read = _read(state_dir, project, stack_name)
    if read is None:
        return None
    path, content, latest = read
    if latest is None:
        return 0  # a new stack: nothing ran, nothing was interrupted
    pending = latest.get("pending_operations") or []
    if not isinstance(pending, list):
        return None
    if not pending:
        return 0
    latest["pending_operations"] = []
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, prefix=f".{path.name}.", delete=False, encoding="utf-8"
    ) as staged:
        json.dump(content, staged, indent=4)
    os.chmod(staged.name, path.stat().st_mode)  # as readable as the CLI left it
    # The blob driver's attributes describe the bytes it wrote (their MD5); without them the
    # file reads as one it did not write, which it serves alike.
    path.with_name(path.name + ATTRIBUTES).unlink(missing_ok=True)
    os.replace(staged.name, path)
    return len(pending)


def _read(
    directory: Path, project: str, stack_name: str
) -> tuple[Path, Any, dict[str, Any] | None] | None:
    """The checkpoint's path, its content and its latest deployment, when this module knows
    its form."""
    stacks = directory / ".pulumi" / "stacks" / project
    if any((stacks / f"{stack_name}{suffix}").exists() for suffix in _COMPRESSED):
        return None
    path = stacks / f"{stack_name}.json"
    try:
        content = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(content, dict) or not _known_version(content):
        return None
    checkpoint = content.get("checkpoint")
    if not isinstance(checkpoint, dict):
        return None
    latest = checkpoint.get("latest")  # None: a new stack, whose outputs the CLI tells
    if latest is not None and not isinstance(latest, dict):
        return None
    return path, content, latest


def _known_version(content: dict[str, Any]) -> bool:
    version, features = content.get("version"), content.get("features")
    if version == CHECKPOINT_VERSION:
        return features is None
    return (
        version == FEATURES_VERSION
        and isinstance(features, list)
        and all(isinstance(f, str) for f in features)
        and KNOWN_FEATURES.issuperset(features)
    )


def _local_directory(backend_url: str | None) -> Path | None:
    if backend_url is None:
        return None
    parts = urlsplit(backend_url)
    if parts.scheme != "file" or parts.netloc or parts.query or not parts.path:
        return None
    return Path(unquote(parts.path))


def _root_outputs(latest: dict[str, Any] | None) -> dict[str, Any] | None:
    resources = None if latest is None else latest.get("resources")
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

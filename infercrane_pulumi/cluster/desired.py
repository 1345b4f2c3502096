"""The desired state as the API server holds it: a stack file kept in a ConfigMap, read fresh.

Each replica of the runner sees the ConfigMap through its own kubelet's copy, which lags behind
the API server for as long as that kubelet is slow or stopped; the stack's lease orders the
runs, not the copies. So a run that names the ConfigMap (``up --configmap``) reads the stack
file from the API server once it holds the stack's lease, and applies that: a GET without a
``resourceVersion`` is a quorum read, at least as new as anything a run before it read
(which held the lease before this one took it). The run records what it read (a
``records.DesiredVersion``: the ConfigMap's uid and ``resourceVersion``) in the stack's
outputs. Where the API server says its resource versions may be ordered (Kubernetes 1.35 and
later, KEP-5504), a read older than the recorded one is refused as ``StaleDesiredStateError``
and changes nothing; before 1.35 they may only be told apart, and the fresh read is the order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infercrane_pulumi.cluster.api import Cluster, subject
from infercrane_pulumi.errors import ConfigError, StaleDesiredStateError
from infercrane_pulumi.objects.kinds import CONFIG_MAP
from infercrane_pulumi.program.records import DesiredVersion

# The first release whose resource versions a client may compare (KEP-5504, stable in 1.35).
COMPARABLE_FROM = (1, 35)
_RELEASE = re.compile(r"v?(\d+)\.(\d+)")


@dataclass(frozen=True)
class Desired:
    """A stack file's text as read from the API server, and which version it is."""

    text: str
    version: DesiredVersion


def read(cluster: Cluster, namespace: str, name: str, key: str) -> Desired:
    """The stack file under ``key`` of ConfigMap ``name``, read from the API server now."""
    where = subject(CONFIG_MAP.kind, namespace, name)
    found = cluster.get(CONFIG_MAP, namespace, name)
    if found is None:
        raise ConfigError(f"{where}: not found; it holds the stack file this run applies")
    text = (found.get("data") or {}).get(key)
    if not isinstance(text, str):
        raise ConfigError(f"{where}: has no key {key!r}; it holds the stack file as {key}")
    meta = found["metadata"]
    return Desired(text, DesiredVersion(where, str(meta["uid"]), str(meta["resourceVersion"])))


def comparable(server_version: str) -> bool:
    """Whether an API server of ``server_version`` (``/version``'s ``gitVersion``) lets a client
    order resource versions."""
    match = _RELEASE.match(server_version)
    return match is not None and (int(match[1]), int(match[2])) >= COMPARABLE_FROM


def check_order(read: DesiredVersion, recorded: DesiredVersion | None, *, ordered: bool) -> None:
    """Refuse a version older than the one the stack recorded. Another ConfigMap, or the same
    name made anew (another uid), is a newer write; ``ordered``: the server's resource versions
    may be compared (``comparable``)."""
    if recorded is None or (read.source, read.uid) != (recorded.source, recorded.uid):
        return
    if ordered and _older(read.resource_version, recorded.resource_version):
        raise StaleDesiredStateError(
            f"{read.source}: read at resourceVersion {read.resource_version}, older than "
            f"{recorded.resource_version}, which the stack already applied; nothing was changed"
        )


def _older(version: str, than: str) -> bool:
    """KEP-5504's order: decimal integers without leading zeros, compared by length, then
    digit by digit. A version not of that form cannot be ordered: never older."""
    if not (version.isdecimal() and than.isdecimal()):
        return False
    return (len(version), version) < (len(than), than)

"""``Ownership``: the custom resource each packaged ``Replica`` holds, whose deletion deletes the
component's objects. The engine deletes a removed component's children by name, which the
ownership rule forbids, so they are registered with ``retainOnDelete`` and the engine only
forgets them; the engine deletes this resource too (first: it depends on them), and it deletes
them the one way InferCrane deletes: each object exactly ours, by the uid just read
(``hand_run.delete_key``). A look-alike in their place is left alone. Its state holds what
deleting needs and nothing else: the namespace's settings (a kubeconfig path, never contents),
the key, and the identity of the stack that applied them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi

from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.hand_run import delete_key
from infercrane_pulumi.objects import naming

TYPE = naming.REPLICA_TYPE.rsplit(":", 1)[0] + ":Ownership"
# The settings travel as one JSON string: the engine's property values have no integers, and a
# stack file's settings are validated with them.
SETTINGS = "kubernetes"
# Where the objects live: another value means other objects, so the old resource is replaced,
# and its deletion deletes the objects at the old place; any other change is an update.
PLACE = ("externalKey", "stack")
SETTINGS_PLACE = ("context", "namespace", "workloadApi")


class Ownership(pulumi.CustomResource):
    def __init__(self, name: str, held: Mapping[str, str], opts: pulumi.ResourceOptions) -> None:
        super().__init__(TYPE, name, dict(held), opts)


def held(settings: KubernetesSettings, key: str, *, stack: str) -> dict[str, str]:
    """The resource's inputs: what deleting ``key``'s objects takes."""
    return {
        SETTINGS: json.dumps(
            settings.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True
        ),
        "externalKey": key,
        "stack": stack,
    }


def replaced(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The inputs whose change moves the objects elsewhere (``PLACE``)."""
    moved = [name for name in PLACE if old.get(name) != new.get(name)]
    before, after = _settings(old), _settings(new)
    if any(before.get(name) != after.get(name) for name in SETTINGS_PLACE):
        moved.append(SETTINGS)
    return moved


def delete(state: Mapping[str, Any]) -> None:
    """Delete the objects ``state`` holds, by the ownership rule."""
    config = parse_stack_config(_settings(state), [])
    delete_key(kubeconfigs.for_run(config, None), state["externalKey"], stack=state["stack"])


def _settings(values: Mapping[str, Any]) -> dict[str, Any]:
    text = values.get(SETTINGS)
    found = json.loads(text) if isinstance(text, str) else None
    return found if isinstance(found, dict) else {}

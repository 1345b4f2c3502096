"""Names, labels and annotations: pure functions of the durable key and the configuration.

A retry after a lost response must land on the very same objects, so nothing here may depend on
time, randomness, Pulumi state or the cluster. Whether a live object carries these marks
exactly (ours) is the verdict's to say (``cluster.verdict.owner_key``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent

NAME_PREFIX = "infercrane-"
KEY_HASH_CHARS = 24
PROVIDER_CONTRACT = "infercrane.provider/v1"
FIELD_MANAGER = "infercrane-provider-v1"

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_KEY_HASH = "infercrane.dev/external-key-hash"
LABEL_STACK = "infercrane.dev/stack-hash"
ANNOTATION_EXTERNAL_KEY = "infercrane.dev/external-key"
ANNOTATION_CONTRACT = "infercrane.dev/provider-contract"
ANNOTATION_INTENT_HASH = "infercrane.dev/intent-hash"

# The Pulumi project every driver runs (``automation.project`` writes it), and the stack output
# recording the settings a run applied (``config.files.settings_record``).
PROJECT_NAME = "infercrane"
SETTINGS_OUTPUT = "kubernetes"

RUNTIME_NAME = "infercrane-runtime"
MANAGED_BY = "infercrane"
OWNED_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_NAME}={RUNTIME_NAME}"

# Settings that never shape an object (where the cluster is) stay out of the intent hash.
_LOCATION_ONLY = frozenset({"context", "kubeconfig"})


def key_hash(external_key: str) -> str:
    return hashlib.sha256(external_key.encode("utf-8")).hexdigest()[:KEY_HASH_CHARS]


def object_name(external_key: str) -> str:
    return NAME_PREFIX + key_hash(external_key)


# Pulumi's names: the component of a key, its children, the stack's one provider.
REPLICA_TYPE = "infercrane:kubernetes:Replica"


def child_name(external_key: str, kind: str) -> str:
    return f"{object_name(external_key)}-{kind.lower()}"


def provider_name(settings: KubernetesSettings) -> str:
    return f"infercrane-{settings.namespace}"


def resource_id(settings: KubernetesSettings, external_key: str) -> str:
    return f"kubernetes:{settings.workload_api}:{settings.namespace}/{object_name(external_key)}"


def labels(external_key: str) -> dict[str, str]:
    return {
        LABEL_NAME: RUNTIME_NAME,
        LABEL_INSTANCE: object_name(external_key),
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_KEY_HASH: key_hash(external_key),
    }


def stack_identity(project: str, stack: str) -> str:
    """The mark every applied object carries of the stack that applies it, so the next run of
    that stack, from any process, finds what a run that died created
    (``cluster.verdict``, its leftovers).
    A program run by hand knows only its project and stack names, never its backend, so those
    two are the identity; two backends' stacks of one name on one namespace are one stack
    here (they would fight over the same key-derived names anyway)."""
    return key_hash(f"{project}/{stack}")


def selector(external_key: str) -> dict[str, str]:
    return {LABEL_INSTANCE: object_name(external_key)}


def intent_hash(settings: KubernetesSettings, intent: ReplicaIntent) -> str:
    shaping = settings.model_dump(mode="json", by_alias=True, exclude=set(_LOCATION_ONLY))
    document = {"intent": intent.model_dump(mode="json", by_alias=True), "config": shaping}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def carried_hash(meta: Mapping[str, Any]) -> str | None:
    """The intent hash an object carries (its metadata's annotation; None: none)."""
    found = (meta.get("annotations") or {}).get(ANNOTATION_INTENT_HASH)
    return None if found is None else str(found)


def carries(meta: Mapping[str, Any], wanted: str) -> bool:
    """Whether an object (its metadata) carries the intent whose ``intent_hash`` is
    ``wanted``: the one rule of "as applied?" (the verdict's drift, readiness). Hash an intent
    with the settings it was (or is to be) applied with: what the stack recorded was applied
    with the recorded settings, so a change of settings alone is a change to make, never
    drift found."""
    return carried_hash(meta) == wanted


def object_annotations(settings: KubernetesSettings, intent: ReplicaIntent) -> dict[str, str]:
    return {
        ANNOTATION_EXTERNAL_KEY: intent.external_key,
        ANNOTATION_CONTRACT: PROVIDER_CONTRACT,
        ANNOTATION_INTENT_HASH: intent_hash(settings, intent),
    }

"""What every measurement deploys, ours and the floor alike, so their numbers compare.

N intents of the ``deployment`` workload API (a Deployment and a Service each) in one
namespace; then one intent more (what a control plane does most: one change into a namespace
that holds many); the preview changes one intent's runtime arguments, the smallest real edit.
"""

from __future__ import annotations

from collections.abc import Sequence

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent, StackConfig
from infercrane_pulumi.config.rules import parse_stack_config

IMAGE = "registry.example/vllm/vllm-openai@sha256:" + "5e" * 32
RUNTIME_ARGS = ("--max-model-len", "8192")
CHANGED_ARGS = ("--max-model-len", "4096")

# Operation keys, in the order each repetition runs them, with the names tables print.
OPERATIONS = {
    "up": "first up",
    "noop": "no-op up",
    "add1": "add 1 intent",
    "preview": "preview, 1 changed",
    "destroy": "destroy",
}


class UnexpectedResultError(RuntimeError):
    """A measured operation did not do what the scenario says it does: its numbers would
    describe some other work, so the run stops."""


def intents(n: int) -> list[ReplicaIntent]:
    return [_intent(i) for i in range(n)]


def extra_intent(n: int) -> ReplicaIntent:
    """The intent added to a stack of ``intents(n)``."""
    return _intent(n)


def _intent(index: int) -> ReplicaIntent:
    return ReplicaIntent.model_validate(
        {
            "externalKey": f"bench-{index:05d}",
            "model": "Qwen/Qwen3-0.6B",
            "gpu": "NVIDIA-L4",
            "runtimeArgs": list(RUNTIME_ARGS),
        }
    )


def next_revision(intent: ReplicaIntent) -> ReplicaIntent:
    """The replica that replaces ``intent`` in a rolling revision change: a new durable key
    (InferCrane gives each revision's replica its own) for the model's next revision."""
    return intent.model_copy(
        update={"external_key": f"{intent.external_key}-r2", "model_revision": "r2"}
    )


def pods_after(operation: str, n: int) -> int:
    """How many Pods the namespace holds once ``operation`` settled, in the order above."""
    return {"up": n, "noop": n, "destroy": 0}.get(operation, n + 1)


def with_one_changed(desired: Sequence[ReplicaIntent]) -> list[ReplicaIntent]:
    first, *rest = desired
    return [first.model_copy(update={"runtime_args": list(CHANGED_ARGS)}), *rest]


def settings(context: str, namespace: str) -> KubernetesSettings:
    return KubernetesSettings.model_validate(
        {"context": context, "namespace": namespace, "imageDigest": IMAGE}
    )


def stack_config(settings: KubernetesSettings, desired: Sequence[ReplicaIntent]) -> StackConfig:
    """Validated as the program validates it: from the config blocks' JSON form."""
    return parse_stack_config(
        settings.model_dump(mode="json", by_alias=True, exclude_none=True),
        [intent.model_dump(mode="json", by_alias=True) for intent in desired],
    )

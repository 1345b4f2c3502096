"""What every object of a replica intent shares: its metadata (names, labels, the ownership and
intent annotations, the directives to pulumi-kubernetes), and the YAML ``render`` prints.

Pure functions only: no Pulumi, no clients, no I/O. Each workload API's module builds its own
objects around this metadata (``deployment``, ``kserve``), with the Pod from ``podspec``; the
Pulumi layer, ``render``, ``diff`` and the ownership preflight all take their objects from the
workload table (``workloads``), so what a reviewer renders is what the engine applies and what
the preflight dry-runs.
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import naming, podspec

Manifest = podspec.Manifest  # every builder's value type

# Directives to pulumi-kubernetes, carried on every object we own:
# - a fixed field manager (otherwise it is random per provider instance);
# - no readiness await: Pods may never become ready (no GPU node yet); readiness is observed
#   by `inspect`, so `up` returns as soon as the API server has accepted the objects;
# - Background deletion: Foreground would block `destroy` on the garbage collector.
APPLY_ANNOTATIONS = {
    "pulumi.com/patchFieldManager": naming.FIELD_MANAGER,
    "pulumi.com/skipAwait": "true",
    "pulumi.com/deletionPropagationPolicy": "background",
}


def metadata(
    settings: KubernetesSettings,
    intent: ReplicaIntent,
    extra_annotations: Mapping[str, str],
    *,
    stack: str | None = None,
) -> Manifest:
    """The object's metadata; ``stack``: the identity of the stack applying it (none when only
    rendered for a reader)."""
    stack_label = {} if stack is None else {naming.LABEL_STACK: stack}
    return {
        "name": naming.object_name(intent.external_key),
        "namespace": settings.namespace,
        "labels": naming.labels(intent.external_key) | stack_label,
        "annotations": naming.object_annotations(settings, intent)
        | dict(extra_annotations)
        | APPLY_ANNOTATIONS,
    }


# libyaml's emitter gives the same text about ten times faster when PyYAML was built with it.
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def to_yaml(objects: list[Manifest]) -> str:
    return yaml.dump_all(objects, Dumper=YAML_DUMPER, sort_keys=True, default_flow_style=False)

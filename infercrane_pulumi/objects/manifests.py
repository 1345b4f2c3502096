"""What a replica intent becomes: the exact Kubernetes objects, as plain dicts.

Pure functions only: no Pulumi, no clients, no I/O. The Pod inside them comes from ``podspec``.
Which of these builders a workload API uses
is decided in ``workloads``; the Pulumi layer, ``render``, ``diff`` and the ownership preflight
all take their objects from there, so what a reviewer renders is what the engine applies and
what the preflight dry-runs.
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import naming, podspec
from infercrane_pulumi.objects.kinds import DEPLOYMENT, INFERENCE_SERVICE, SERVICE
from infercrane_pulumi.objects.podspec import (
    DEPLOYMENT_POD,
    KSERVE_POD,
    PORT_NAME,
    pod_fields,
    progress_deadline_seconds,
)

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


def deployment(settings: KubernetesSettings, intent: ReplicaIntent, meta: Manifest) -> Manifest:
    return {
        "apiVersion": DEPLOYMENT.group_version,
        "kind": DEPLOYMENT.kind,
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "progressDeadlineSeconds": progress_deadline_seconds(settings, intent),
            "selector": {"matchLabels": naming.selector(intent.external_key)},
            "template": {
                "metadata": {"labels": naming.labels(intent.external_key)},
                "spec": pod_fields(settings, intent, DEPLOYMENT_POD),
            },
        },
    }


def service(settings: KubernetesSettings, intent: ReplicaIntent, meta: Manifest) -> Manifest:
    return {
        "apiVersion": SERVICE.group_version,
        "kind": SERVICE.kind,
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": naming.selector(intent.external_key),
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": intent.effective_port,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }


def inference_service(
    settings: KubernetesSettings, intent: ReplicaIntent, meta: Manifest
) -> Manifest:
    # Recreate, as our Deployments: a new revision must not wait for a second GPU while the old
    # one holds the first (KServe's default is a rolling update with surge).
    predictor = {
        "minReplicas": 1,
        "maxReplicas": 1,
        "deploymentStrategy": {"type": "Recreate"},
    } | pod_fields(settings, intent, KSERVE_POD)
    return {
        "apiVersion": INFERENCE_SERVICE.group_version,
        "kind": INFERENCE_SERVICE.kind,
        "metadata": meta,
        "spec": {"predictor": predictor},
    }


# libyaml's emitter gives the same text about ten times faster when PyYAML was built with it.
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def to_yaml(objects: list[Manifest]) -> str:
    return yaml.dump_all(objects, Dumper=YAML_DUMPER, sort_keys=True, default_flow_style=False)

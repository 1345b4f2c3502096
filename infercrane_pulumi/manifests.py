"""What a replica intent becomes: the exact Kubernetes objects, as plain dicts.

Pure functions only: no Pulumi, no clients, no I/O. Which of these builders a workload API uses
is decided in ``workloads``; the Pulumi layer, ``render``, ``diff`` and the ownership preflight
all take their objects from there, so what a reviewer renders is what the engine applies and
what the preflight dry-runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from infercrane_pulumi import naming
from infercrane_pulumi.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.kinds import DEPLOYMENT, INFERENCE_SERVICE, SERVICE

Manifest = dict[str, Any]

CONTAINER_NAME = "runtime"
# The official vllm/vllm-openai image's ENTRYPOINT changed between releases
# (["python3", "-m", "vllm.entrypoints.openai.api_server"], then ["vllm", "serve"]), and args
# given for one generation fail on the other. Both generations ship this module and run it as
# the OpenAI server with --model, so the container names its command itself.
VLLM_COMMAND = ("python3", "-m", "vllm.entrypoints.openai.api_server")
PORT_NAME = "http"
WORKER_KEY_ENV = ("INFERCRANE_WORKER_API_KEY", "VLLM_API_KEY")

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


def container_args(intent: ReplicaIntent) -> list[str]:
    if intent.workload is not None:
        values = {
            "MODEL": intent.model,
            "MODEL_REVISION": intent.model_revision or "",
            "PORT": str(intent.effective_port),
        }
        command = list(intent.workload.command)
        for name, value in values.items():
            command = [entry.replace(f"${{{name}}}", value) for entry in command]
        return command + list(intent.runtime_args)
    args = ["--model", intent.model, "--host", "0.0.0.0", "--port", str(intent.effective_port)]
    if intent.model_revision is not None:
        args += ["--revision", intent.model_revision]
    return args + list(intent.runtime_args)


def runtime_container(settings: KubernetesSettings, intent: ReplicaIntent) -> Manifest:
    workload = intent.workload
    gpu = {settings.gpu_resource: "1"}
    argv: Manifest = (
        {"command": list(VLLM_COMMAND), "args": container_args(intent)}
        if workload is None
        else {"command": container_args(intent)}
    )
    container: Manifest = {
        "name": CONTAINER_NAME,
        "image": settings.image_digest if workload is None else workload.image,
        "imagePullPolicy": "IfNotPresent",
        **argv,
        "ports": [{"name": PORT_NAME, "containerPort": intent.effective_port, "protocol": "TCP"}],
        "env": [
            {
                "name": env_name,
                "valueFrom": {
                    "secretKeyRef": {
                        "name": settings.worker_secret_name,
                        "key": settings.worker_secret_key,
                    }
                },
            }
            for env_name in WORKER_KEY_ENV
        ],
        "readinessProbe": {
            "httpGet": {
                "path": "/health" if workload is None else workload.readiness_path,
                "port": PORT_NAME,
            },
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 12,
        },
        "resources": {"requests": dict(gpu), "limits": dict(gpu)},
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    if settings.shm_size is not None:
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return container


def pod_fields(settings: KubernetesSettings, intent: ReplicaIntent) -> Manifest:
    """The pod-level fields shared by a Deployment template and a KServe predictor."""
    grace = 30 if intent.workload is None else intent.workload.shutdown_grace_seconds
    fields: Manifest = {
        "serviceAccountName": settings.service_account,
        "terminationGracePeriodSeconds": grace,
        "nodeSelector": {settings.gpu_product_label: intent.gpu},
    }
    if settings.runtime_class_name is not None:
        fields["runtimeClassName"] = settings.runtime_class_name
    if settings.tolerations:
        fields["tolerations"] = [
            toleration.model_dump(by_alias=True, exclude_none=True)
            for toleration in settings.tolerations
        ]
    if settings.shm_size is not None:
        fields["volumes"] = [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": settings.shm_size}}
        ]
    fields["containers"] = [runtime_container(settings, intent)]
    return fields


def metadata(
    settings: KubernetesSettings, intent: ReplicaIntent, extra_annotations: Mapping[str, str]
) -> Manifest:
    return {
        "name": naming.object_name(intent.external_key),
        "namespace": settings.namespace,
        "labels": naming.labels(intent.external_key),
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
            "progressDeadlineSeconds": 1800,
            "selector": {"matchLabels": naming.selector(intent.external_key)},
            "template": {
                "metadata": {"labels": naming.labels(intent.external_key)},
                "spec": pod_fields(settings, intent),
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
    predictor = {"minReplicas": 1, "maxReplicas": 1} | pod_fields(settings, intent)
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

"""The Deployment workload API: a replica is a Deployment (one Pod, ``Recreate``) and a
ClusterIP Service in front of it; it serves at the Service, and is ready once the Deployment's
controller has rolled out the current intent. Its entry of the workload table (``API``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.kinds import DEPLOYMENT, SERVICE
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.podspec import (
    PORT_NAME,
    PodDialect,
    pod_fields,
    progress_deadline_seconds,
)
from infercrane_pulumi.objects.readiness import (
    Object,
    Readiness,
    conditions,
    explained,
    not_current,
    pod_reason,
)
from infercrane_pulumi.objects.workloadapi import WorkloadApi

DEPLOYMENT_POD = PodDialect(container_name="runtime")


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


def ready(workload: Object, desired_hash: str, pods: Sequence[Object] | None) -> Readiness:
    status = workload.get("status") or {}
    progressing = conditions(workload).get("Progressing") or {}
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return Readiness("failed", explained(progressing))
    stale = not_current(workload, desired_hash, status.get("observedGeneration"))
    if stale:
        return Readiness("provisioning", stale)
    updated = int(status.get("updatedReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    # Pods of an older revision still exist while replicas exceeds updatedReplicas.
    if updated >= 1 and available >= 1 and int(status.get("replicas") or 0) == updated:
        return Readiness("ready")
    available_condition = conditions(workload).get("Available") or {}
    # The ReplicaSet could not create a Pod (an admission refusal, say Pod Security): no Pod
    # exists to give a reason, and the Deployment copies the ReplicaSet's.
    replica_failure = conditions(workload).get("ReplicaFailure") or {}
    return Readiness(
        "provisioning",
        pod_reason(pods or ())
        or (replica_failure.get("status") == "True" and explained(replica_failure))
        or (available_condition.get("status") == "False" and explained(available_condition))
        or explained(progressing)
        or "waiting for the Deployment controller",
    )


def endpoint(settings: KubernetesSettings, intent: ReplicaIntent) -> str:
    name = naming.object_name(intent.external_key)
    return f"http://{name}.{settings.namespace}.svc:{intent.effective_port}"


def pod_spec(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    template: Mapping[str, Any] = (workload.get("spec") or {}).get("template") or {}
    found: Mapping[str, Any] = template.get("spec") or {}
    return found


def replica_count(workload: Mapping[str, Any]) -> int:
    return int((workload.get("spec") or {}).get("replicas", 1))


API = WorkloadApi(
    name="deployment",
    kinds=(DEPLOYMENT, SERVICE),
    builders=(deployment, service),
    endpoint=endpoint,
    readiness=ready,
    pod_spec=pod_spec,
    replica_count=replica_count,
    manifests="base",
)

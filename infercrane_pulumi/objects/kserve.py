"""The KServe workload API (Standard mode): a replica is one InferenceService whose predictor
runs the Pod; KServe makes its Deployment and Service, and the replica serves at the
predictor's Service. Ready is KServe's own verdict checked against the Pods, when they may be
read. Its entry of the workload table (``API``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.kinds import INFERENCE_SERVICE
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.podspec import PodDialect, pod_fields
from infercrane_pulumi.objects.readiness import (
    Object,
    Readiness,
    another_intent,
    conditions,
    explained,
    pod_reason,
)
from infercrane_pulumi.objects.workloadapi import Check, RequiredField, WorkloadApi

DNS_LABEL_MAX = 63
# KServe renames the single container of a custom predictor to this (CustomPredictor.Default).
KSERVE_POD = PodDialect(container_name="kserve-container", cpu_limit_required=True)
# ISVC model transition states in which KServe stopped trying (see its ModelStatus).
_KSERVE_GAVE_UP = frozenset({"BlockedByFailedLoad", "InvalidSpec"})


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


NO_KSERVE_CONTROLLER = "no KServe controller has reconciled this InferenceService"


def _serving(pod: Object) -> bool:
    return (conditions(pod).get("Ready") or {}).get("status") == "True"


def _pods_behind(pods: Sequence[Object] | None, desired_hash: str) -> str:
    """Why the readable predictor Pods do not show the current intent serving ("" if they do,
    or cannot be read)."""
    if pods is None:
        return ""
    current = [pod for pod in pods if naming.carries(pod.get("metadata") or {}, desired_hash)]
    if len(current) < len(pods):
        return "a Pod of the previous intent still runs"
    if not current:
        return "no predictor Pod of the current intent yet"
    if not any(map(_serving, current)):
        return pod_reason(current) or "the current intent's predictor Pod is not ready"
    return ""


def ready(workload: Object, desired_hash: str, pods: Sequence[Object] | None) -> Readiness:
    """KServe's verdict, and the predictor's Pods when this identity may read them (``None``:
    it may not): KServe copies the InferenceService's annotations into them, and its Ready
    condition follows the predictor Deployment's availability, which can still be the previous
    intent's Pod, or none at all while ``Recreate`` replaces it. Without the Pods, KServe's
    Ready is all there is, and until KServe has reconciled a change it can be the previous
    intent's (``doctor`` says so)."""
    status = workload.get("status") or {}
    if not status:
        return Readiness("provisioning", NO_KSERVE_CONTROLLER)
    model = status.get("modelStatus") or {}
    if model.get("transitionStatus") in _KSERVE_GAVE_UP:
        failure = model.get("lastFailureInfo") or {}
        return Readiness("failed", explained(failure) or str(model["transitionStatus"]))
    # Not the generation: KServe (Standard mode, v0.16 to v0.20 at least) copies its predictor
    # Deployment's observedGeneration into status.observedGeneration, which therefore never
    # says whether the InferenceService's own generation was reconciled (a change of our
    # annotations alone leaves the two apart for good). Only the Pods can say which intent runs.
    another = another_intent(workload, desired_hash)
    if another:
        return Readiness("provisioning", another)
    ready = conditions(workload).get("Ready") or {}
    if ready.get("status") == "True":
        behind = _pods_behind(pods, desired_hash)
        return Readiness("provisioning", behind) if behind else Readiness("ready")
    current = [pod for pod in pods or () if naming.carries(pod.get("metadata") or {}, desired_hash)]
    return Readiness(
        "provisioning",
        pod_reason(current) or explained(ready) or "waiting for the KServe controller",
    )


def endpoint(settings: KubernetesSettings, intent: ReplicaIntent) -> str:
    # KServe Standard mode fronts the predictor with its own Service on port 80.
    name = naming.object_name(intent.external_key)
    return f"http://{name}-predictor.{settings.namespace}.svc:80"


def host_label_problems(obj: Manifest) -> list[str]:
    # KServe names the predictor's host "<name>-predictor-<namespace>" (its default
    # ingress.domainTemplate, applied even with ingress creation off) and refuses to reconcile
    # an InferenceService whose label is longer than a DNS label may be.
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    label = f"{name}-predictor-{namespace}"
    if len(label) <= DNS_LABEL_MAX:
        return []
    return [
        f"InferenceService/{namespace}/{name}: KServe names its predictor's host {label} "
        f"({len(label)} characters, over the {DNS_LABEL_MAX} of a DNS label) and never "
        f"reconciles it; in KServe mode a namespace has at most "
        f"{DNS_LABEL_MAX - len(label) + len(namespace)} characters"
    ]


def controller_check(owned: Sequence[Manifest]) -> Check:
    """Whether a KServe controller reconciles the owned InferenceServices: one that did wrote
    their status; none can be seen before one exists."""
    if not owned:
        return (
            "info",
            "kserve:controller",
            "no InferenceService here yet: no sign of a KServe controller either way",
        )
    reconciled = sum(1 for obj in owned if obj.get("status"))
    if reconciled:
        return ("ok", "kserve:controller", f"{reconciled} of {len(owned)} reconciled by KServe")
    return (
        "warn",
        "kserve:controller",
        f"none of the {len(owned)} InferenceService(s) here was reconciled: "
        "no KServe controller seems to run",
    )


def pod_spec(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    predictor: Mapping[str, Any] = (workload.get("spec") or {}).get("predictor") or {}
    return predictor


def replica_count(workload: Mapping[str, Any]) -> int:
    return int(pod_spec(workload).get("maxReplicas", 1))


API = WorkloadApi(
    name="kserve",
    kinds=(INFERENCE_SERVICE,),
    builders=(inference_service,),
    endpoint=endpoint,
    readiness=ready,
    pod_spec=pod_spec,
    replica_count=replica_count,
    controller_check=controller_check,
    pods_needed="ready is KServe's own Ready, which until KServe reconciles a change can be "
    "the previous intent's",
    manifests="kserve",
    annotations={
        "serving.kserve.io/deploymentMode": "Standard",
        # InferCrane owns scaling: KServe then makes no HPA and runs minReplicas Pods.
        "serving.kserve.io/autoscalerClass": "none",
    },
    install_hint="install KServe and its CRDs first, then apply the Kustomize base "
    "deploy/kubernetes/kserve through your overlay",
    # The Standard mode is an annotation value no schema lists, and KServe before v0.16
    # silently runs an unknown mode as its default (Serverless, say). storageUris came
    # into the schema with v0.16, the first release that knows Standard.
    unreconcilable=host_label_problems,
    requires=(
        RequiredField(
            INFERENCE_SERVICE,
            ("spec", "predictor", "storageUris"),
            "this KServe predates v0.16, the first that knows the Standard deployment "
            "mode (an older one runs it in its default mode); install KServe v0.16 or later",
        ),
    ),
)

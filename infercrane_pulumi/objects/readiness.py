"""When a replica counts as serving: one pure rule per workload API, over live objects as read.

The control plane routes traffic on ``ready``, so ``ready`` means "the *current* intent is
serving": the controller has observed the latest generation, the object carries the desired
intent hash, and a replica of that revision is available. Anything less is ``provisioning``
with the most specific reason the objects (and, when readable, the Pods) give, or ``failed``
when the workload API itself has given up. No I/O here; ``cluster.observe`` reads the objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infercrane_pulumi.objects import naming

State = Literal["ready", "provisioning", "failed", "degraded", "absent", "orphaned"]
Object = Mapping[str, Any]

# ISVC model transition states in which KServe stopped trying (see its ModelStatus).
_KSERVE_GAVE_UP = frozenset({"BlockedByFailedLoad", "InvalidSpec"})


@dataclass(frozen=True)
class Readiness:
    state: State
    reason: str = ""


def conditions(obj: Object) -> dict[str, Mapping[str, Any]]:
    """An object's status conditions by type."""
    found = (obj.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in found if isinstance(c, Mapping)}


def _explained(condition: Mapping[str, Any]) -> str:
    reason, message = condition.get("reason") or "", condition.get("message") or ""
    return f"{reason}: {message}" if reason and message else str(reason or message)


def _another_intent(obj: Object, desired_hash: str) -> str | None:
    """Why the live object does not carry the desired intent (our change is not applied), or
    None."""
    meta = obj.get("metadata") or {}
    if not naming.carries(meta, desired_hash):
        live_hash = naming.carried_hash(meta)
        return f"{obj.get('kind')} carries another intent ({live_hash}); the change is not applied"
    return None


def _not_current(obj: Object, desired_hash: str, generation_of_status: Any) -> str | None:
    """Why the live object does not (yet) describe the desired intent, or None."""
    meta = obj.get("metadata") or {}
    another = _another_intent(obj, desired_hash)
    if another:
        return another
    if generation_of_status != meta.get("generation"):
        return f"generation {meta.get('generation')} not yet observed by its controller"
    return None


def _last_exit(container: Mapping[str, Any]) -> str:
    """How a container that is waiting to restart ended last time ("" if it never ended)."""
    ended = (container.get("lastState") or {}).get("terminated")
    if not ended:
        return ""
    return f" (last exit code {ended.get('exitCode')}: {ended.get('reason') or 'no reason'})"


def pod_reason(pods: Sequence[Object]) -> str:
    """The most telling reason a Pod of the replica gives for not serving ("" if none)."""
    for pod in pods:
        scheduled = conditions(pod).get("PodScheduled") or {}
        if scheduled.get("status") == "False":
            return _explained(scheduled)
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting")
            if waiting:
                return _explained(waiting) + _last_exit(container)
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            # Running but not started: the startup probe has not passed yet (the model loads).
            if (container.get("state") or {}).get("running") and container.get("started") is False:
                restarts = int(container.get("restartCount") or 0)
                return (
                    f"Starting: container {container.get('name')} is running and its startup "
                    f"probe has not passed yet (loading the model; {restarts} restart(s))"
                )
    for pod in pods:
        found = conditions(pod)
        ready = found.get("Ready") or {}
        # The kubelet marks a Pod ready exactly when its containers are; only the node
        # controller marks it not ready over containers the kubelet last saw ready, when the
        # Pod's node stops reporting. The node itself is not ours to read.
        if (
            ready.get("status") == "False"
            and (found.get("ContainersReady") or {}).get("status") == "True"
        ):
            node = (pod.get("spec") or {}).get("nodeName")
            return (
                f"NodeNotReady: node {node} stopped reporting, and its Pods were marked not ready "
                f"at {ready.get('lastTransitionTime')}; they are evicted when their toleration of "
                "an unreachable node ends (300 s by default)"
            )
    for pod in pods:
        ready = conditions(pod).get("Ready") or {}
        if ready.get("status") == "False":
            return _explained(ready)
    return ""


def deployment(workload: Object, desired_hash: str, pods: Sequence[Object] | None) -> Readiness:
    status = workload.get("status") or {}
    progressing = conditions(workload).get("Progressing") or {}
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return Readiness("failed", _explained(progressing))
    stale = _not_current(workload, desired_hash, status.get("observedGeneration"))
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
        or (replica_failure.get("status") == "True" and _explained(replica_failure))
        or (available_condition.get("status") == "False" and _explained(available_condition))
        or _explained(progressing)
        or "waiting for the Deployment controller",
    )


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


def inference_service(
    workload: Object, desired_hash: str, pods: Sequence[Object] | None
) -> Readiness:
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
        return Readiness("failed", _explained(failure) or str(model["transitionStatus"]))
    # Not the generation: KServe (Standard mode, v0.16 to v0.20 at least) copies its predictor
    # Deployment's observedGeneration into status.observedGeneration, which therefore never
    # says whether the InferenceService's own generation was reconciled (a change of our
    # annotations alone leaves the two apart for good). Only the Pods can say which intent runs.
    another = _another_intent(workload, desired_hash)
    if another:
        return Readiness("provisioning", another)
    ready = conditions(workload).get("Ready") or {}
    if ready.get("status") == "True":
        behind = _pods_behind(pods, desired_hash)
        return Readiness("provisioning", behind) if behind else Readiness("ready")
    current = [pod for pod in pods or () if naming.carries(pod.get("metadata") or {}, desired_hash)]
    return Readiness(
        "provisioning",
        pod_reason(current) or _explained(ready) or "waiting for the KServe controller",
    )

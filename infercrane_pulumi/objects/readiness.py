"""When a replica counts as serving: what every workload API's rule (in its module: ``deployment``,
``kserve``) shares, over live objects as read.

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


@dataclass(frozen=True)
class Readiness:
    state: State
    reason: str = ""


def conditions(obj: Object) -> dict[str, Mapping[str, Any]]:
    """An object's status conditions by type."""
    found = (obj.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in found if isinstance(c, Mapping)}


def explained(condition: Mapping[str, Any]) -> str:
    reason, message = condition.get("reason") or "", condition.get("message") or ""
    return f"{reason}: {message}" if reason and message else str(reason or message)


def another_intent(obj: Object, desired_hash: str) -> str | None:
    """Why the live object does not carry the desired intent (our change is not applied), or
    None."""
    meta = obj.get("metadata") or {}
    if not naming.carries(meta, desired_hash):
        live_hash = naming.carried_hash(meta)
        return f"{obj.get('kind')} carries another intent ({live_hash}); the change is not applied"
    return None


def not_current(obj: Object, desired_hash: str, generation_of_status: Any) -> str | None:
    """Why the live object does not (yet) describe the desired intent, or None."""
    meta = obj.get("metadata") or {}
    another = another_intent(obj, desired_hash)
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
            return explained(scheduled)
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting")
            if waiting:
                return explained(waiting) + _last_exit(container)
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
            return explained(ready)
    return ""

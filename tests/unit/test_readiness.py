"""``ready`` means the current intent is serving; everything short of it says why not."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane_pulumi.objects import deployment, kserve, naming, workloads
from infercrane_pulumi.objects.readiness import Readiness
from tests.unit.fake_cluster import config

SERVING = {
    "observedGeneration": 2,
    "replicas": 1,
    "updatedReplicas": 1,
    "readyReplicas": 1,
    "availableReplicas": 1,
    "conditions": [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
    ],
}


def desired_hash(**settings: Any) -> str:
    stack = config(**settings)
    return naming.intent_hash(stack.kubernetes, stack.replicas[0])


def live(status: dict[str, Any], *, generation: int = 2, **settings: Any) -> dict[str, Any]:
    """Our Deployment (or InferenceService) as the API server returns it, with ``status``."""
    obj = copy.deepcopy(workloads.stack_objects(config(**settings))[0])
    obj["metadata"]["generation"] = generation
    return obj | {"status": status}


def test_a_deployment_serving_the_current_intent_is_ready() -> None:
    assert deployment.ready(live(SERVING), desired_hash(), []) == Readiness("ready")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"observedGeneration": 1},
            "generation 2 not yet observed by its controller",
        ),
        (
            {"updatedReplicas": 0, "replicas": 1},
            "waiting for the Deployment controller",
        ),
        (
            {"availableReplicas": 0, "readyReplicas": 0},
            "waiting for the Deployment controller",
        ),
        # An old revision's Pod still runs beside the updated one.
        ({"replicas": 2}, "waiting for the Deployment controller"),
    ],
    ids=["generation-not-observed", "no-updated-replica", "none-available", "old-pod-left"],
)
def test_a_deployment_short_of_serving_the_current_intent_is_provisioning(
    change: dict[str, Any], reason: str
) -> None:
    status = SERVING | change | {"conditions": []}
    assert deployment.ready(live(status), desired_hash(), []) == Readiness("provisioning", reason)


def test_a_deployment_carrying_another_intent_hash_is_not_ready() -> None:
    other = desired_hash(shmSize="16Gi")
    verdict = deployment.ready(live(SERVING), other, [])
    assert verdict.state == "provisioning"
    assert verdict.reason == (
        f"Deployment carries another intent ({desired_hash()}); the change is not applied"
    )


def test_the_deployments_own_conditions_explain_provisioning_without_pods() -> None:
    status = SERVING | {
        "updatedReplicas": 1,
        "availableReplicas": 0,
        "conditions": [
            {
                "type": "Available",
                "status": "False",
                "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability.",
            },
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
        ],
    }
    assert deployment.ready(live(status), desired_hash(), []) == Readiness(
        "provisioning", "MinimumReplicasUnavailable: Deployment does not have minimum availability."
    )


def test_a_pod_the_scheduler_cannot_place_gives_the_reason() -> None:
    pod = {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/2 nodes are available: 2 node(s) didn't match "
                    "Pod's node affinity/selector.",
                }
            ]
        }
    }
    status = SERVING | {"availableReplicas": 0}
    assert deployment.ready(live(status), desired_hash(), [pod]) == Readiness(
        "provisioning",
        "Unschedulable: 0/2 nodes are available: 2 node(s) didn't match Pod's node "
        "affinity/selector.",
    )


def test_a_waiting_container_gives_the_reason() -> None:
    pod = {
        "status": {
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off"}}}
            ],
        }
    }
    verdict = deployment.ready(live(SERVING | {"availableReplicas": 0}), desired_hash(), [pod])
    assert verdict == Readiness("provisioning", "ImagePullBackOff: Back-off")


def test_a_container_loading_under_its_startup_probe_says_so() -> None:
    not_ready = {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}
    pod = {
        "status": {
            "conditions": [{"type": "PodScheduled", "status": "True"}, not_ready],
            "containerStatuses": [
                {
                    "name": "runtime",
                    "state": {"running": {"startedAt": "2026-12-01T00:00:00Z"}},
                    "started": False,
                    "ready": False,
                    "restartCount": 1,
                }
            ],
        }
    }
    verdict = deployment.ready(live(SERVING | {"availableReplicas": 0}), desired_hash(), [pod])
    assert verdict == Readiness(
        "provisioning",
        "Starting: container runtime is running and its startup probe has not passed yet "
        "(loading the model; 1 restart(s))",
    )


def test_a_pod_whose_node_stopped_reporting_names_the_node() -> None:
    # As the node controller leaves it: Ready False over the kubelet's last word, every
    # container ready (ContainersReady True), with no reason of its own.
    marked = "2026-12-05T16:20:00Z"
    pod = {
        "spec": {"nodeName": "infercrane-worker"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "Ready", "status": "False", "lastTransitionTime": marked},
            ],
            "containerStatuses": [
                {"name": "runtime", "state": {"running": {}}, "started": True, "ready": True}
            ],
        },
    }
    down = SERVING | {
        "availableReplicas": 0,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}
        ],
    }
    verdict = deployment.ready(live(down), desired_hash(), [pod])
    assert verdict == Readiness(
        "provisioning",
        "NodeNotReady: node infercrane-worker stopped reporting, and its Pods were marked not "
        f"ready at {marked}; they are evicted when their toleration of an unreachable node ends "
        "(300 s by default)",
    )


def test_a_replica_set_refused_its_pod_gives_the_admission_reason() -> None:
    refused = (
        'pods "infercrane-x-1" is forbidden: violates PodSecurity "restricted:latest": '
        "runAsNonRoot != true"
    )
    status = SERVING | {
        "availableReplicas": 0,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
            {
                "type": "ReplicaFailure",
                "status": "True",
                "reason": "FailedCreate",
                "message": refused,
            },
        ],
    }
    assert deployment.ready(live(status), desired_hash(), []) == Readiness(
        "provisioning", f"FailedCreate: {refused}"
    )


def test_a_progress_deadline_exceeded_deployment_has_failed() -> None:
    status = SERVING | {
        "availableReplicas": 0,
        "conditions": [
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": 'ReplicaSet "x" has timed out progressing.',
            }
        ],
    }
    assert deployment.ready(live(status), desired_hash(), []) == Readiness(
        "failed", 'ProgressDeadlineExceeded: ReplicaSet "x" has timed out progressing.'
    )


ISVC_READY = {
    "observedGeneration": 2,
    "conditions": [{"type": "Ready", "status": "True"}],
    "modelStatus": {"transitionStatus": "UpToDate"},
}


def test_an_inference_service_ready_for_its_observed_generation_is_ready() -> None:
    isvc = live(ISVC_READY, workloadApi="kserve")
    # Pods unreadable (the shipped Role alone): KServe's word is all there is.
    verdict = kserve.ready(isvc, desired_hash(workloadApi="kserve"), None)
    assert verdict == Readiness("ready")


def test_an_inference_service_s_observed_generation_is_its_predictor_s_and_decides_nothing() -> (
    None
):
    # As a real KServe v0.20 left it after a change of our annotations alone: generation 1,
    # status.observedGeneration 2 (the predictor Deployment's), the new intent's Pod serving.
    isvc = live(ISVC_READY, generation=1, workloadApi="kserve")
    current = desired_hash(workloadApi="kserve")
    verdicts = [
        kserve.ready(isvc, current, pods) for pods in ([predictor_pod(current, ready=True)], None)
    ]
    assert verdicts == [Readiness("ready"), Readiness("ready")]


def test_an_inference_service_kserve_gave_up_on_has_failed() -> None:
    status = {
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": "False", "reason": "PredictorNotReady"}],
        "modelStatus": {
            "transitionStatus": "BlockedByFailedLoad",
            "lastFailureInfo": {"reason": "ModelLoadFailed", "message": "out of memory"},
        },
    }
    isvc = live(status, workloadApi="kserve")
    verdict = kserve.ready(isvc, desired_hash(workloadApi="kserve"), [])
    assert verdict == Readiness("failed", "ModelLoadFailed: out of memory")


def test_a_container_that_keeps_exiting_gives_its_back_off_and_its_last_exit_code() -> None:
    waiting = {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed"}
    pod = {
        "status": {
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {
                    "state": {"waiting": waiting},
                    "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}},
                }
            ],
        }
    }
    verdict = deployment.ready(live(SERVING | {"availableReplicas": 0}), desired_hash(), [pod])
    assert verdict == Readiness(
        "provisioning", "CrashLoopBackOff: back-off 10s restarting failed (last exit code 2: Error)"
    )


def predictor_pod(intent_hash: str, *, ready: bool) -> dict[str, Any]:
    """A predictor Pod as KServe makes it: the InferenceService's annotations copied in."""
    return {
        "metadata": {"annotations": {naming.ANNOTATION_INTENT_HASH: intent_hash}},
        "status": {"conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def test_an_inference_service_no_controller_reconciled_says_so() -> None:
    verdict = kserve.ready(live({}, workloadApi="kserve"), desired_hash(workloadApi="kserve"), [])
    assert verdict == Readiness(
        "provisioning", "no KServe controller has reconciled this InferenceService"
    )


def test_an_inference_service_is_ready_only_once_its_pods_run_the_current_intent() -> None:
    isvc, current = live(ISVC_READY, workloadApi="kserve"), desired_hash(workloadApi="kserve")
    previous = desired_hash(workloadApi="kserve", namespace="elsewhere")
    assert previous != current
    verdicts = [
        kserve.ready(isvc, current, pods)
        for pods in (
            [predictor_pod(previous, ready=True)],
            [predictor_pod(previous, ready=True), predictor_pod(current, ready=False)],
            [],  # Recreate: the old Pod is gone, the new one not yet made
            [predictor_pod(current, ready=False)],
            [predictor_pod(current, ready=True)],
            None,  # Pods unreadable: KServe's word is all there is
        )
    ]
    assert verdicts == [
        Readiness("provisioning", "a Pod of the previous intent still runs"),
        Readiness("provisioning", "a Pod of the previous intent still runs"),
        Readiness("provisioning", "no predictor Pod of the current intent yet"),
        Readiness("provisioning", "the current intent's predictor Pod is not ready"),
        Readiness("ready"),
        Readiness("ready"),
    ]

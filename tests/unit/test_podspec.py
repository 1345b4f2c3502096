"""The runtime Pod: resources and QoS, probes, model cache, credentials, hardening, and what
KServe's defaulting webhook would do to it (nothing), asserted as whole values."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.config.validators import quantity_value
from infercrane_pulumi.objects import podspec, workloads
from tests.unit import samples

SECRET = {"secretKeyRef": {"name": "infercrane-worker", "key": "api-key"}}


def pod(kubernetes: dict[str, Any], replica: dict[str, Any]) -> dict[str, Any]:
    [workload, *_] = workloads.stack_objects(parse_stack_config(kubernetes, [replica]))
    spec = workload["spec"]
    found: dict[str, Any] = spec["predictor"] if "predictor" in spec else spec["template"]["spec"]
    return found


def container(kubernetes: dict[str, Any], replica: dict[str, Any]) -> dict[str, Any]:
    [found] = pod(kubernetes, replica)["containers"]
    result: dict[str, Any] = found
    return result


def qos_class(resources: dict[str, Any]) -> str:
    """The Pod's QoS class as the kubelet computes it for one container (cpu and memory)."""
    requests, limits = resources.get("requests", {}), resources.get("limits", {})
    if not any(name in requests or name in limits for name in ("cpu", "memory")):
        return "BestEffort"
    guaranteed = all(
        name in limits
        and quantity_value(requests.get(name, limits[name])) == quantity_value(limits[name])
        for name in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


@pytest.mark.parametrize("api", ["deployment", "kserve"])
@pytest.mark.parametrize("workload", [None, samples.workload()])
def test_no_rendered_pod_is_best_effort(api: str, workload: dict[str, Any] | None) -> None:
    replica = samples.replica(**({"workload": workload} if workload else {}))
    resources = container(samples.kubernetes(workloadApi=api), replica)["resources"]
    assert qos_class(resources) == "Burstable"
    equal = {"cpuRequest": "4", "cpuLimit": "4", "memoryRequest": "32Gi", "memoryLimit": "32Gi"}
    resources = container(samples.kubernetes(workloadApi=api, resources=equal), replica)
    assert qos_class(resources["resources"]) == "Guaranteed"


def test_an_intent_overrides_resources_field_by_field() -> None:
    settings = samples.kubernetes(resources={"cpuRequest": "8", "cpuLimit": "16"})
    replica = samples.replica(resources={"memoryRequest": "40Gi", "memoryLimit": "80Gi"})
    assert container(settings, replica)["resources"] == {
        "requests": {"cpu": "8", "memory": "40Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "16", "memory": "80Gi", "nvidia.com/gpu": "1"},
    }


@pytest.mark.parametrize(("seconds", "periods"), [(1, 1), (1800, 180), (1801, 181), (3600, 360)])
def test_the_startup_allowance_becomes_whole_probe_periods(seconds: int, periods: int) -> None:
    probes = container(samples.kubernetes(startupSeconds=seconds), samples.replica())
    assert probes["startupProbe"] == {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": periods,
    }
    assert periods == math.ceil(seconds / 10)


def test_custom_workloads_get_startup_and_liveness_probes_on_their_readiness_path() -> None:
    replica = samples.replica(startupSeconds=120, workload=samples.workload())
    found = container(samples.kubernetes(), replica)
    assert [found[p]["httpGet"] for p in ("startupProbe", "livenessProbe", "readinessProbe")] == [
        {"path": "/ready", "port": "http"}
    ] * 3
    assert (found["startupProbe"]["failureThreshold"], found["livenessProbe"]) == (
        12,
        {
            "httpGet": {"path": "/ready", "port": "http"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
    )


def test_the_progress_deadline_outlasts_the_startup_allowance() -> None:
    config = parse_stack_config(samples.kubernetes(), [samples.replica(startupSeconds=5400)])
    [deployment, _] = workloads.stack_objects(config)
    assert deployment["spec"]["progressDeadlineSeconds"] == 5400 + 600


@pytest.mark.parametrize(
    ("cache", "volume"),
    [
        ({"claimName": "hf-cache"}, {"persistentVolumeClaim": {"claimName": "hf-cache"}}),
        ({"sizeLimit": "200Gi"}, {"emptyDir": {"sizeLimit": "200Gi"}}),
    ],
)
def test_the_model_cache_is_mounted_where_hf_home_points(
    cache: dict[str, Any], volume: dict[str, Any]
) -> None:
    found = pod(samples.kubernetes(modelCache=cache), samples.replica())
    assert found["volumes"] == [{"name": "model-cache", **volume}]
    [runtime] = found["containers"]
    assert runtime["volumeMounts"] == [
        {"name": "model-cache", "mountPath": "/var/cache/huggingface"}
    ]
    assert runtime["env"][-1] == {"name": "HF_HOME", "value": "/var/cache/huggingface"}


def test_a_custom_workload_names_its_cache_path_and_an_intent_its_own_cache() -> None:
    replica = samples.replica(
        modelCache={"sizeLimit": "50Gi"}, workload=samples.workload(cachePath="/models")
    )
    found = pod(samples.kubernetes(modelCache={"claimName": "shared"}), replica)
    assert found["volumes"] == [{"name": "model-cache", "emptyDir": {"sizeLimit": "50Gi"}}]
    [runtime] = found["containers"]
    assert runtime["volumeMounts"] == [{"name": "model-cache", "mountPath": "/models"}]
    assert {"name": "HF_HOME", "value": "/models"} in runtime["env"]


def test_the_hf_token_is_a_secret_reference_and_nothing_else() -> None:
    token = {"secretName": "hf-token", "key": "token"}
    found = container(samples.kubernetes(hfToken=token), samples.replica())
    assert found["env"] == [
        {"name": "INFERCRANE_WORKER_API_KEY", "valueFrom": SECRET},
        {"name": "VLLM_API_KEY", "valueFrom": SECRET},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
    ]


def test_a_custom_runtime_gets_the_worker_key_in_the_one_variable_it_reads() -> None:
    replica = samples.replica(workload=samples.workload(workerKey={"env": "SGLANG_API_KEY"}))
    found = container(samples.kubernetes(), replica)
    assert found["env"] == [{"name": "SGLANG_API_KEY", "valueFrom": SECRET}]
    assert "volumeMounts" not in found


def test_a_custom_runtime_gets_the_worker_key_as_a_read_only_file() -> None:
    worker_key = {"file": "/run/secrets/infercrane/worker-api-key"}
    replica = samples.replica(workload=samples.workload(workerKey=worker_key))
    found = pod(samples.kubernetes(runAsUser=10001), replica)
    [runtime] = found["containers"]
    assert [v for v in found["volumes"] if v["name"] == "worker-key"] == [
        {
            "name": "worker-key",
            "secret": {
                "secretName": "infercrane-worker",
                "items": [{"key": "api-key", "path": "worker-api-key"}],
                "defaultMode": 0o440,
            },
        }
    ]
    assert runtime["volumeMounts"][-1] == {
        "name": "worker-key",
        "mountPath": "/run/secrets/infercrane",
        "readOnly": True,
    }
    # No variable carries it, and the runtime's group (fsGroup) may read the file.
    assert runtime["env"] == [{"name": "HOME", "value": "/home/runtime"}]
    assert found["securityContext"]["fsGroup"] == 10001


def test_hardening_is_on_by_default_and_non_root_is_a_setting() -> None:
    default = pod(samples.kubernetes(), samples.replica())
    assert default["automountServiceAccountToken"] is False
    assert default["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert default["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": False,
    }
    assert "volumes" not in default

    hardened = pod(
        samples.kubernetes(runAsUser=10001, readOnlyRootFilesystem=True), samples.replica()
    )
    assert hardened["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
    }
    [runtime] = hardened["containers"]
    assert runtime["securityContext"]["readOnlyRootFilesystem"] is True
    # The writable directories the runtime needs, and HOME pointing at one of them.
    assert hardened["volumes"] == [
        {"name": "tmp", "emptyDir": {}},
        {"name": "home", "emptyDir": {}},
    ]
    assert runtime["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "home", "mountPath": "/home/runtime"},
    ]
    assert runtime["env"][-1] == {"name": "HOME", "value": "/home/runtime"}


# KServe's defaulting webhook for a custom predictor (CustomPredictor.Default and
# setResourceRequirementDefaults in kserve/kserve), as data: a predictor with exactly one
# container gets the container name below, and each of these resources it lacks gets the
# configured default (the stock inferenceservice-config values).
KSERVE_CONTAINER_NAME = "kserve-container"
KSERVE_DEFAULT_REQUESTS = {"cpu": "1", "memory": "2Gi"}
KSERVE_DEFAULT_LIMITS = {"cpu": "1", "memory": "2Gi"}


def kserve_defaulted(predictor: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(predictor)
    containers = result.setdefault("containers", [{}])
    if len(containers) == 1 or not containers[0].get("name"):
        containers[0]["name"] = KSERVE_CONTAINER_NAME
    resources = containers[0].setdefault("resources", {})
    for field, defaults in (
        ("requests", KSERVE_DEFAULT_REQUESTS),
        ("limits", KSERVE_DEFAULT_LIMITS),
    ):
        resources[field] = defaults | resources.get(field, {})
    return result


@pytest.mark.parametrize(
    "settings",
    [samples.kubernetes(workloadApi="kserve"), samples.every_setting(workloadApi="kserve")],
    ids=["defaults", "every-setting"],
)
@pytest.mark.parametrize("workload", [None, samples.workload()], ids=["vllm", "custom"])
def test_kserve_s_defaulting_webhook_changes_nothing_we_own(
    settings: dict[str, Any], workload: dict[str, Any] | None
) -> None:
    replica = samples.replica(**({"workload": workload} if workload else {}))
    predictor = pod(settings, replica)
    assert kserve_defaulted(predictor) == predictor


def test_the_defaulting_model_does_change_a_predictor_that_leaves_it_room() -> None:
    # The rule above would be vacuous if the model never changed anything.
    bare = {"containers": [{"name": "runtime", "resources": {"limits": {"memory": "8Gi"}}}]}
    assert kserve_defaulted(bare) == {
        "containers": [
            {
                "name": "kserve-container",
                "resources": {
                    "requests": {"cpu": "1", "memory": "2Gi"},
                    "limits": {"cpu": "1", "memory": "8Gi"},
                },
            }
        ]
    }


def expanded(text: str, env: dict[str, str]) -> str:
    """What Kubernetes makes of a container's command or args entry (its documented expansion:
    ``$(NAME)`` from the container's environment, ``$$`` reduced to ``$``, anything else kept)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and (end := text.find(")", i)) != -1:
            name = text[i + 2 : end]
            out.append(env.get(name, text[i : end + 1]))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


ENVIRONMENT = {"VLLM_API_KEY": "the-worker-key", "HF_TOKEN": "hf-secret", "PORT": "8000"}


@settings(deadline=None)  # a loaded machine's pause is no failure
@given(st.text(alphabet="$(){}AKPVY_ -", max_size=40))
def test_no_string_of_a_stack_file_is_expanded_by_kubernetes(text: str) -> None:
    """A model named ``$(VLLM_API_KEY)`` once reached the runtime as the worker key."""
    assert [expanded(entry, ENVIRONMENT) for entry in podspec.literal([text])] == [text]


@pytest.mark.parametrize("kserve", [False, True], ids=["deployment", "kserve"])
def test_every_field_reaches_the_runtime_to_the_letter(kserve: bool) -> None:
    settings = samples.kubernetes(**({"workloadApi": "kserve"} if kserve else {}))
    # A credential's name is refused before this (``validators``); any other is kept as is.
    default = samples.replica(
        model="org/$(PORT)", modelRevision="$(PORT)$$", runtimeArgs=["--x=$(PORT)$$"]
    )
    found = container(settings, default)
    argv = [*found["command"], *found["args"]]
    assert [expanded(entry, ENVIRONMENT) for entry in argv] == [
        *podspec.VLLM_COMMAND,
        *("--model", "org/$(PORT)", "--host", "0.0.0.0", "--port", "8000"),
        *("--revision", "$(PORT)$$", "--x=$(PORT)$$"),
    ]
    workload = {
        "image": samples.IMAGE,
        "command": ["serve", "--model", "${MODEL}", "--port", "${PORT}"],
    }
    custom = container(settings, samples.replica(model="$(PORT)", workload=workload))
    assert [expanded(entry, ENVIRONMENT) for entry in custom["command"]] == [
        *("serve", "--model", "$(PORT)", "--port", "8000"),
    ]

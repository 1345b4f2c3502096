"""What an intent becomes, asserted as whole objects, and validated against real schemas."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from infercrane_pulumi.cluster import verdict
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects import manifests, naming, workloads
from tests.unit import samples

FIXTURES = Path(__file__).parent.parent / "fixtures"
KEY = "dep-7-r0"
HASH = hashlib.sha256(KEY.encode()).hexdigest()[:24]
NAME = f"infercrane-{HASH}"
# Golden: the hash of the canonical intent must not drift between releases, or every
# object would be re-annotated on upgrade. Issue 17's settings (resources, probes, cache,
# hardening) changed it once, on purpose: docs/how-to/upgrading.md.
INTENT_HASH = "sha256:11a7bb9e4009fbd2985671863c77dc8e26a4e15c885725700cf788ab30c56098"
LABELS = {
    "app.kubernetes.io/name": "infercrane-runtime",
    "app.kubernetes.io/instance": NAME,
    "app.kubernetes.io/managed-by": "infercrane",
    "infercrane.dev/external-key-hash": HASH,
}
SECRET_REF = {"secretKeyRef": {"name": "infercrane-worker", "key": "api-key"}}


def metadata(**extra_annotations: str) -> dict[str, Any]:
    return {
        "name": NAME,
        "namespace": "infercrane-system",
        "labels": LABELS,
        "annotations": {
            "infercrane.dev/external-key": KEY,
            "infercrane.dev/provider-contract": "infercrane.provider/v1",
            "infercrane.dev/intent-hash": INTENT_HASH,
            "pulumi.com/patchFieldManager": "infercrane-provider-v1",
            "pulumi.com/skipAwait": "true",
            "pulumi.com/deletionPropagationPolicy": "background",
            **extra_annotations,
        },
    }


CONTAINER = {
    "name": "runtime",
    "image": samples.IMAGE,
    "imagePullPolicy": "IfNotPresent",
    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
    "args": ["--model", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "8000"],
    "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
    "env": [
        {"name": "INFERCRANE_WORKER_API_KEY", "valueFrom": SECRET_REF},
        {"name": "VLLM_API_KEY", "valueFrom": SECRET_REF},
    ],
    "startupProbe": {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 180,  # the default 1,800 s allowance
    },
    "livenessProbe": {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    },
    # Out of routing after 15 s of failures, before liveness restarts the engine (30 s).
    "readinessProbe": {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": 5,
        "timeoutSeconds": 2,
        "failureThreshold": 3,
    },
    "resources": {
        "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"},
    },
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": False,
    },
}
POD = {
    "serviceAccountName": "infercrane-runtime",
    "automountServiceAccountToken": False,
    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    "terminationGracePeriodSeconds": 30,
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"},
    "containers": [CONTAINER],
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": metadata(),
    "spec": {
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "progressDeadlineSeconds": 2400,  # the startup allowance + 600 s
        "selector": {"matchLabels": {"app.kubernetes.io/instance": NAME}},
        "template": {"metadata": {"labels": LABELS}, "spec": POD},
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": metadata(),
    "spec": {
        "type": "ClusterIP",
        "selector": {"app.kubernetes.io/instance": NAME},
        "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}],
    },
}


def objects(kubernetes: dict[str, Any], *replicas: dict[str, Any]) -> list[dict[str, Any]]:
    return workloads.stack_objects(parse_stack_config(kubernetes, list(replicas)))


def test_deployment_mode_is_exactly_a_deployment_and_a_service() -> None:
    assert objects(samples.kubernetes(), samples.replica()) == [DEPLOYMENT, SERVICE]


def test_kserve_mode_is_exactly_one_standard_inference_service() -> None:
    [isvc] = objects(samples.kubernetes(workloadApi="kserve"), samples.replica())
    expected_meta = metadata(
        **{
            "serving.kserve.io/deploymentMode": "Standard",
            "serving.kserve.io/autoscalerClass": "none",
        }
    )
    assert isvc["metadata"]["annotations"].pop("infercrane.dev/intent-hash").startswith("sha256:")
    expected_meta["annotations"].pop("infercrane.dev/intent-hash")
    # KServe's own container name, and a CPU limit of our own (the request).
    container = CONTAINER | {
        "name": "kserve-container",
        "resources": {
            "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "limits": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
        },
    }
    assert isvc == {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": expected_meta,
        "spec": {
            "predictor": {
                "minReplicas": 1,
                "maxReplicas": 1,
                "deploymentStrategy": {"type": "Recreate"},
                **POD,
                "containers": [container],
            }
        },
    }


def test_name_is_prefix_plus_24_hex_of_sha256_of_the_key() -> None:
    assert naming.object_name(KEY) == NAME
    assert naming.object_name("x" * 253).startswith("infercrane-")
    assert len(naming.object_name("x" * 253)) == 11 + 24


def test_resource_id_names_api_namespace_and_name() -> None:
    config = parse_stack_config(samples.kubernetes(workloadApi="kserve", namespace="team-a"), [])
    assert naming.resource_id(config.kubernetes, KEY) == f"kubernetes:kserve:team-a/{NAME}"


def test_revision_and_runtime_args_follow_the_server_args() -> None:
    replica = samples.replica(modelRevision="0123abcd", runtimeArgs=["--max-model-len", "8192"])
    [deployment, _] = objects(samples.kubernetes(), replica)
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--model",
        "Qwen/Qwen3-8B",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--revision",
        "0123abcd",
        "--max-model-len",
        "8192",
    ]


def test_portable_workload_substitutes_placeholders_and_uses_its_own_fields() -> None:
    replica = samples.replica(
        modelRevision="rev1",
        runtimeArgs=["--tp", "2"],
        workload=samples.workload(command=["launch", "${MODEL}@${MODEL_REVISION}", "${PORT}"]),
    )
    [deployment, service] = objects(samples.kubernetes(), replica)
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["launch", "Qwen/Qwen3-8B@rev1", "30000", "--tp", "2"]
    assert "args" not in container
    assert container["image"] == samples.WORKLOAD_IMAGE
    assert container["ports"] == [{"name": "http", "containerPort": 30000, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    assert pod["terminationGracePeriodSeconds"] == 45
    assert service["spec"]["ports"][0]["port"] == 30000


def test_gpu_and_product_label_are_used_verbatim() -> None:
    settings = samples.kubernetes(gpuResource="amd.com/gpu", gpuProductLabel="amd.com/gpu.product")
    [deployment, _] = objects(settings, samples.replica(gpu="AMD-Instinct-MI300X"))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"amd.com/gpu.product": "AMD-Instinct-MI300X"}
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "16Gi", "amd.com/gpu": "1"},
        "limits": {"memory": "32Gi", "amd.com/gpu": "1"},
    }


def test_opt_ins_add_shm_tolerations_and_runtime_class() -> None:
    settings = samples.kubernetes(
        shmSize="16Gi",
        resources={"memoryLimit": "40Gi"},
        runtimeClassName="nvidia",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    [deployment, _] = objects(settings, samples.replica())
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    ]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["runtimeClassName"] == "nvidia"


def test_intent_hash_tracks_what_shapes_objects_and_ignores_location() -> None:
    def intent_hash(kubernetes: dict[str, Any], replica: dict[str, Any]) -> str:
        config = parse_stack_config(kubernetes, [replica])
        return naming.intent_hash(config.kubernetes, config.replicas[0])

    base = intent_hash(samples.kubernetes(), samples.replica())
    assert base == INTENT_HASH
    assert (
        intent_hash(samples.kubernetes(context="other", kubeconfig="/x"), samples.replica()) == base
    )
    assert intent_hash(samples.kubernetes(), samples.replica(gpu="NVIDIA-L4")) != base
    assert intent_hash(samples.kubernetes(workerSecretKey="token"), samples.replica()) != base


def test_ownership_requires_every_mark() -> None:
    meta = copy.deepcopy(metadata())
    assert verdict.is_exactly_ours(meta, "infercrane-system", KEY)
    assert not verdict.is_exactly_ours(meta, "other-namespace", KEY)
    for label in ("app.kubernetes.io/managed-by", "infercrane.dev/external-key-hash"):
        broken = copy.deepcopy(meta)
        broken["labels"][label] = "someone-else"
        assert not verdict.is_exactly_ours(broken, "infercrane-system", KEY)
    broken = copy.deepcopy(meta)
    del broken["annotations"]["infercrane.dev/external-key"]
    assert not verdict.is_exactly_ours(broken, "infercrane-system", KEY)


def test_rendered_objects_are_sorted_and_stable() -> None:
    config = parse_stack_config(
        samples.kubernetes(), [samples.replica(externalKey=k) for k in ("b", "a", "c")]
    )
    first = manifests.to_yaml(workloads.stack_objects(config))
    documents = list(yaml.safe_load_all(first))
    keys = [(d["metadata"]["name"], d["kind"]) for d in documents]
    assert keys == sorted(keys)
    assert manifests.to_yaml(workloads.stack_objects(config)) == first


@pytest.mark.parametrize("workload", [None, samples.workload()])
def test_deployment_and_service_validate_strictly_against_kubernetes_schemas(
    workload: dict[str, Any] | None,
) -> None:
    for settings in (samples.kubernetes(), samples.every_setting()):
        replica = samples.replica(**({"workload": workload} if workload else {}))
        for obj in objects(settings, replica):
            kubernetes_validate.validate(obj, "1.36.0", strict=True)


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The CRD's structural schema as JSON Schema that rejects fields the CRD would prune."""
    result = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes")}
    result.pop("format", None)
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        result["additionalProperties"] = False
    if "properties" in result:
        result["properties"] = {k: _strict(v) for k, v in result["properties"].items()}
    if isinstance(result.get("items"), dict):
        result["items"] = _strict(result["items"])
    if isinstance(result.get("additionalProperties"), dict):
        inner = result["additionalProperties"]
        result["additionalProperties"] = (
            {"type": ["integer", "string"]}
            if inner.get("x-kubernetes-int-or-string")
            else _strict(inner)
        )
    return result


def test_inference_service_validates_against_the_kserve_crd_fixture() -> None:
    crd = yaml.safe_load((FIXTURES / "kserve-inferenceservice-crd.yaml").read_text())
    schema = _strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    for settings in (samples.kubernetes(), samples.every_setting()):
        for replica in (samples.replica(), samples.replica(workload=samples.workload())):
            [isvc] = objects(settings | {"workloadApi": "kserve"}, replica)
            jsonschema.validate(isvc, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"spec": {"predictor": {"replicaz": 1}}}, schema)

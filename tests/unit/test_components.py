"""The Pulumi shape, through the real program under mocks: what gets registered, and how."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime import rpc

from infercrane_pulumi.config import files, kubeconfigs
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import ConfigError, InferCraneError, OwnershipError
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.kinds import DEPLOYMENT
from infercrane_pulumi.program import handoff
from infercrane_pulumi.program.components import PLUGIN_VERSION
from tests.unit import samples
from tests.unit.pulumi_harness import DRIVER_KUBECONFIG, run_program

PROVIDER_TYPE = "pulumi:providers:kubernetes"
REPLICA_TYPE = "infercrane:kubernetes:Replica"
STACK_URN = "urn:pulumi:unit::infercrane::pulumi:pulumi:Stack::infercrane-unit"


def three_replicas() -> list[dict[str, Any]]:
    return [
        samples.replica(externalKey="dep-7-r0"),
        samples.replica(externalKey="dep-7-r1", modelRevision="abc", runtimeArgs=["--tp", "2"]),
        samples.replica(externalKey="dep-8-r0", workload=samples.workload()),
    ]


@pytest.mark.parametrize(
    ("workload_api", "child_types"),
    [
        ("deployment", ["kubernetes:apps/v1:Deployment", "kubernetes:core/v1:Service"]),
        ("kserve", ["kubernetes:serving.kserve.io/v1beta1:InferenceService"]),
    ],
)
def test_each_intent_is_one_component_owning_exactly_its_objects(
    workload_api: str, child_types: list[str]
) -> None:
    kubernetes = samples.kubernetes(workloadApi=workload_api)
    run = run_program(kubernetes, three_replicas())
    assert run.error is None

    expected = workloads.stack_objects(
        parse_stack_config(kubernetes, three_replicas()),
        stack=naming.stack_identity("infercrane", "unit"),
    )
    components = run.of_type(REPLICA_TYPE)
    assert sorted(c.name for c in components) == sorted({o["metadata"]["name"] for o in expected})
    assert all(c.parent == STACK_URN for c in components)

    objects = run.kubernetes_objects
    assert len(objects) == len(expected) == 3 * len(child_types)
    for registration in objects:
        owner = registration.name.rsplit("-", 1)[0]
        assert registration.parent.endswith(f"{REPLICA_TYPE}::{owner}")
        assert registration.type in child_types
        # The engine deletes by name; only the ownership rule deletes, by uid.
        assert registration.retain_on_delete
        assert registration.name in {
            f"{owner}-deployment",
            f"{owner}-service",
            f"{owner}-inferenceservice",
        }
    # Registered inputs are the pure manifests, field for field.
    registered = sorted(
        (r.inputs for r in objects), key=lambda o: (o["metadata"]["name"], o["kind"])
    )
    assert registered == expected


def test_one_explicit_provider_per_stack_with_ssa_and_a_stable_cluster_identifier() -> None:
    kubernetes = samples.kubernetes(namespace="team-a", kubeconfig="/etc/infercrane/kubeconfig")
    run = run_program(kubernetes, three_replicas())
    [provider] = run.of_type(PROVIDER_TYPE)
    assert provider.name == "infercrane-team-a"
    assert {
        k: provider.inputs[k]
        for k in ("context", "namespace", "clusterIdentifier", "enableServerSideApply")
    } == {
        "context": "kind-infercrane",
        "namespace": "team-a",
        "clusterIdentifier": "kind-infercrane",
        "enableServerSideApply": "true",
    }
    assert "kubeconfig" in provider.secret_inputs
    for registration in run.kubernetes_objects:
        assert "$pulumi:providers:kubernetes::infercrane-team-a::" in registration.provider


def test_the_provider_asks_for_the_plugin_the_toolchain_builds_whatever_the_sdk() -> None:
    build = (Path(__file__).parents[2] / "hack/tools/build.sh").read_text()
    [built] = re.findall(r"^PULUMI_K8S_VERSION=(\S+)", build, re.MULTILINE)
    [provider] = run_program(samples.kubernetes(), [samples.replica()]).of_type(PROVIDER_TYPE)
    assert provider.version == PLUGIN_VERSION == built


def sdk_variables() -> set[str]:
    """Every variable pulumi-kubernetes' SDK reads for a provider input it is not given."""
    source = Path(inspect.getfile(k8s.Provider)).read_text(encoding="utf-8")
    return set(re.findall(r"_utilities\.get_env(?:_bool)?\('([A-Z0-9_]+)'\)", source))


@pytest.mark.parametrize("kubeconfig", [None, "/etc/infercrane/stack-kubeconfig"])
def test_the_provider_takes_nothing_from_the_environment_of_the_process_serving_it(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: str | None
) -> None:
    """The program is served from a driver's process: its KUBECONFIG and PULUMI_K8S_* are the
    control plane's, not the run's. The stack's kubeconfig, else the driver's, and the context
    reach the provider explicitly, whatever the process's environment holds."""
    settings = samples.kubernetes() | ({} if kubeconfig is None else {"kubeconfig": kubeconfig})
    [clean] = run_program(settings, [samples.replica()]).of_type(PROVIDER_TYPE)
    variables = sdk_variables()
    assert {"KUBECONFIG", "PULUMI_K8S_DELETE_UNREACHABLE"} <= variables
    for name in variables:
        monkeypatch.setenv(name, "/elsewhere/kubeconfig" if name == "KUBECONFIG" else "true")
    [decoyed] = run_program(settings, [samples.replica()]).of_type(PROVIDER_TYPE)
    assert decoyed.inputs == clean.inputs
    assert clean.inputs["kubeconfig"] == {
        rpc._special_sig_key: rpc._special_secret_sig,
        "value": kubeconfig or DRIVER_KUBECONFIG,
    }
    assert clean.inputs["context"] == clean.inputs["clusterIdentifier"] == "kind-infercrane"


@pytest.mark.parametrize(("own", "driver"), [("kc.yaml", DRIVER_KUBECONFIG), (None, "kc.yaml")])
def test_a_relative_kubeconfig_reaches_the_provider_as_the_file_the_program_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own: str | None, driver: str
) -> None:
    """The plugin runs in the engine's working directory, not the program's: it is given the
    absolute file the program's checks read (for a person's ``pulumi up``, in the project
    directory, where Pulumi runs the program)."""
    monkeypatch.chdir(tmp_path)
    settings = samples.kubernetes() | ({} if own is None else {"kubeconfig": own})
    checked: list[str | None] = []

    def preflight(rendered: workloads.Rendered) -> None:
        checked.append(rendered.config.kubernetes.kubeconfig)

    run = run_program(settings, [samples.replica()], preflight=preflight, kubeconfig=driver)
    [provider] = run.of_type(PROVIDER_TYPE)
    assert checked == [provider.inputs["kubeconfig"]["value"]] == [str(tmp_path / "kc.yaml")]


def test_a_stack_without_a_kubeconfig_and_a_driver_without_one_registers_nothing() -> None:
    refused: list[InferCraneError] = []
    run = run_program(
        samples.kubernetes(), [samples.replica()], kubeconfig=None, report=refused.append
    )
    assert run.registrations == []
    [error] = refused
    assert isinstance(error, ConfigError)
    assert error.problems == (
        "infercrane:kubernetes.kubeconfig: no kubeconfig for context 'kind-infercrane': set "
        "it, or give the driver's kubeconfig (PulumiEnvironment.kubeconfig, or $KUBECONFIG)",
    )


@pytest.mark.parametrize("workload_api", ["deployment", "kserve"])
def test_every_object_carries_our_field_manager_and_nothing_forces(workload_api: str) -> None:
    run = run_program(samples.kubernetes(workloadApi=workload_api), three_replicas())
    assert run.kubernetes_objects
    for registration in run.kubernetes_objects:
        annotations = registration.inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/patchFieldManager"] == "infercrane-provider-v1"
        assert annotations["pulumi.com/skipAwait"] == "true"
        assert annotations["pulumi.com/deletionPropagationPolicy"] == "background"
    everything = json.dumps([r.inputs for r in run.registrations]).lower()
    assert "patchforce" not in everything
    assert "force" not in json.dumps([r.inputs for r in run.of_type(PROVIDER_TYPE)]).lower()


def test_stack_outputs_per_key_give_resource_id_objects_and_endpoint() -> None:
    kubernetes = samples.kubernetes(namespace="team-a")
    run = run_program(kubernetes, [samples.replica(), samples.replica(externalKey="k2", port=9000)])
    name = "infercrane-8b51d0fee928a78116afaac0"
    assert run.outputs["namespace"] == "team-a"
    assert run.outputs["workloadApi"] == "deployment"
    assert run.outputs["kubernetes"] == files.settings_record(
        parse_stack_config(kubernetes, []).kubernetes
    )
    assert set(run.outputs["replicas"]) == {"dep-7-r0", "k2"}
    assert run.outputs["replicas"]["dep-7-r0"] == {
        "resourceId": f"kubernetes:deployment:team-a/{name}",
        "endpoint": f"http://{name}.team-a.svc:8000",
        # Mocks return no uid or generation; the engine's provider does (see test_unchanged).
        "objects": [
            {"kind": "Deployment", "name": name, "uid": None, "generation": None},
            {"kind": "Service", "name": name, "uid": None, "generation": None},
        ],
        "intent": parse_stack_config(kubernetes, [samples.replica()])
        .replicas[0]
        .model_dump(mode="json", by_alias=True),
    }
    assert run.outputs["replicas"]["k2"]["endpoint"].endswith(".team-a.svc:9000")


def test_kserve_outputs_point_at_the_predictor_service() -> None:
    run = run_program(samples.kubernetes(workloadApi="kserve"), [samples.replica()])
    name = "infercrane-8b51d0fee928a78116afaac0"
    assert run.outputs["replicas"]["dep-7-r0"] == {
        "resourceId": f"kubernetes:kserve:infercrane-system/{name}",
        "endpoint": f"http://{name}-predictor.infercrane-system.svc:80",
        "objects": [{"kind": "InferenceService", "name": name, "uid": None, "generation": None}],
        "intent": {
            "externalKey": "dep-7-r0",
            "model": "Qwen/Qwen3-8B",
            "modelRevision": None,
            "gpu": "NVIDIA-L40S",
            "runtimeArgs": [],
            "port": 8000,
            "workload": None,
            "resources": {
                "cpuRequest": None,
                "cpuLimit": None,
                "memoryRequest": None,
                "memoryLimit": None,
            },
            "startupSeconds": None,
            "modelCache": None,
        },
    }


def test_keys_the_driver_carries_are_exported_as_recorded_and_never_registered() -> None:
    """A targeted run's program registers only the keys it works on; the engine keeps the
    others as the state holds them, and the outputs still record every key."""
    kubernetes, replicas = samples.kubernetes(), three_replicas()
    record = {"resourceId": "as-recorded", "endpoint": "e", "objects": [], "intent": {"k": 1}}
    # The configuration the driver checked: its kubeconfig resolved, as the program's is.
    checked = kubeconfigs.for_run(parse_stack_config(kubernetes, replicas), DRIVER_KUBECONFIG)
    kept = handoff.Carried.of(checked, {"dep-7-r0": record, "dep-8-r0": record})
    run = run_program(kubernetes, replicas, carried=kept)
    assert [r.name for r in run.of_type(REPLICA_TYPE)] == [naming.object_name("dep-7-r1")]
    assert {r.parent.rpartition("::")[2] for r in run.kubernetes_objects} == {
        naming.object_name("dep-7-r1")
    }
    assert list(run.outputs["replicas"]) == ["dep-7-r0", "dep-7-r1", "dep-8-r0"]
    assert run.outputs["replicas"]["dep-7-r0"] == run.outputs["replicas"]["dep-8-r0"] == record
    assert run.outputs["replicas"]["dep-7-r1"]["intent"]["externalKey"] == "dep-7-r1"


def test_records_carried_for_another_configuration_are_ignored() -> None:
    kubernetes, replicas = samples.kubernetes(), three_replicas()
    other = parse_stack_config(kubernetes, replicas[:2])
    stale = handoff.Carried.of(other, {"dep-7-r0": {"resourceId": "old"}})
    run = run_program(kubernetes, replicas, carried=stale)
    assert len(run.of_type(REPLICA_TYPE)) == 3
    assert run.outputs["replicas"]["dep-7-r0"]["resourceId"] != "old"


def test_preflight_sees_the_validated_config_before_any_registration() -> None:
    seen: list[int] = []
    run = run_program(
        samples.kubernetes(),
        three_replicas(),
        preflight=lambda rendered: seen.append(len(rendered.config.replicas)),
    )
    assert seen == [3]
    assert run.error is None


def test_a_refusing_preflight_means_zero_registrations_and_is_handed_over_as_itself() -> None:
    refusal = OwnershipError(["Deployment/infercrane-system/x: exists but is not exactly ours"])

    def refuse(config: object) -> None:
        raise refusal

    reported: list[InferCraneError] = []
    run = run_program(
        samples.kubernetes(), three_replicas(), preflight=refuse, report=reported.append
    )
    assert run.registrations == []
    assert reported == [refusal]  # the driver serving the program gets the error, not text
    assert "[ownership-conflict]" in str(run.error)
    assert "Deployment/infercrane-system/x: exists but is not exactly ours" in str(run.error)


def test_the_worker_credential_is_registered_only_as_a_reference_to_its_secret() -> None:
    run = run_program(samples.kubernetes(), three_replicas())
    assert run.error is None
    deployments = [r.inputs for r in run.of_type(DEPLOYMENT.pulumi_type)]
    assert len(deployments) == 3
    reference = {"secretKeyRef": {"name": "infercrane-worker", "key": "api-key"}}
    for deployment in deployments:
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["env"] == [
            {"name": "INFERCRANE_WORKER_API_KEY", "valueFrom": reference},
            {"name": "VLLM_API_KEY", "valueFrom": reference},
        ]

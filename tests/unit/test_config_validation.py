"""Bad input is refused as a whole, every problem named, before anything is registered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infercrane_pulumi.config.files import load_stack_file
from infercrane_pulumi.config.intents import effective_resources
from infercrane_pulumi.config.podsettings import Resources
from infercrane_pulumi.config.rules import parse_stack_config, parse_stack_section
from infercrane_pulumi.errors import ConfigError
from tests.unit import samples
from tests.unit.pulumi_harness import run_program

K = "infercrane:kubernetes"
R = "infercrane:replicas"

BAD_INPUTS: list[tuple[str, dict[str, Any], list[Any], str]] = [
    (
        "missing context",
        {"imageDigest": samples.IMAGE},
        [samples.replica()],
        f"{K}.context: is required",
    ),
    ("missing image", {"context": "c"}, [samples.replica()], f"{K}.imageDigest: is required"),
    (
        "unknown settings key",
        samples.kubernetes(replicasPerNode=2),
        [samples.replica()],
        f"{K}.replicasPerNode: is not a known key",
    ),
    (
        "unknown intent key",
        samples.kubernetes(),
        [samples.replica(priority=1)],
        f"{R}[0].priority: is not a known key",
    ),
    (
        "latest tag",
        samples.kubernetes(imageDigest="registry.example/vllm:latest"),
        [samples.replica()],
        f"{K}.imageDigest: must be digest-pinned",
    ),
    (
        "short digest",
        samples.kubernetes(imageDigest="registry.example/vllm@sha256:abc"),
        [samples.replica()],
        f"{K}.imageDigest: must be digest-pinned",
    ),
    (
        "uppercase digest",
        samples.kubernetes(imageDigest="r.example/v@sha256:" + "AB" * 32),
        [samples.replica()],
        f"{K}.imageDigest: must be digest-pinned",
    ),
    (
        "mutable workload image",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(image="ghcr.io/sglang:v0.4"))],
        f"{R}[0].workload.image: must be digest-pinned",
    ),
    (
        "workload api",
        samples.kubernetes(workloadApi="statefulset"),
        [samples.replica()],
        f"{K}.workloadApi: Input should be 'deployment' or 'kserve'",
    ),
    (
        "namespace uppercase",
        samples.kubernetes(namespace="InferCrane"),
        [samples.replica()],
        f"{K}.namespace: must be a DNS label starting with a letter",
    ),
    (
        "namespace digit first",
        samples.kubernetes(namespace="7crane"),
        [samples.replica()],
        f"{K}.namespace: must be a DNS label starting with a letter",
    ),
    (
        "namespace too long",
        samples.kubernetes(namespace="n" * 64),
        [samples.replica()],
        f"{K}.namespace: must be a DNS label starting with a letter of at most 63",
    ),
    (
        "service account dots",
        samples.kubernetes(serviceAccount="infer.crane"),
        [samples.replica()],
        f"{K}.serviceAccount: must be a DNS label",
    ),
    (
        "secret name underscore",
        samples.kubernetes(workerSecretName="worker_key"),
        [samples.replica()],
        f"{K}.workerSecretName: must be a DNS label",
    ),
    (
        "secret key slash",
        samples.kubernetes(workerSecretKey="api/key"),
        [samples.replica()],
        f"{K}.workerSecretKey: must be [A-Za-z0-9._-]",
    ),
    (
        "secret key leading dot",
        samples.kubernetes(workerSecretKey=".api-key"),
        [samples.replica()],
        f"{K}.workerSecretKey: must be [A-Za-z0-9._-]",
    ),
    (
        "secret key trailing dash",
        samples.kubernetes(workerSecretKey="api-key-"),
        [samples.replica()],
        f"{K}.workerSecretKey: must be [A-Za-z0-9._-]",
    ),
    (
        "empty model",
        samples.kubernetes(),
        [samples.replica(model="  ")],
        f"{R}[0].model: must not be empty",
    ),
    ("empty gpu", samples.kubernetes(), [samples.replica(gpu="")], f"{R}[0].gpu: must be a label"),
    (
        "gpu not a label value",
        samples.kubernetes(),
        [samples.replica(gpu="NVIDIA L40S")],
        f"{R}[0].gpu: must be a label value",
    ),
    (
        "missing model",
        samples.kubernetes(),
        [{"externalKey": "k", "gpu": "NVIDIA-L4"}],
        f"{R}[0].model: is required",
    ),
    (
        "port zero",
        samples.kubernetes(),
        [samples.replica(port=0)],
        f"{R}[0].port: Input should be greater than or equal to 1",
    ),
    (
        "port too big",
        samples.kubernetes(),
        [samples.replica(port=65536)],
        f"{R}[0].port: Input should be less than or equal to 65535",
    ),
    (
        "port as string",
        samples.kubernetes(),
        [samples.replica(port="8000")],
        f"{R}[0].port: Input should be a valid integer",
    ),
    (
        "workload port too big",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(port=70000))],
        f"{R}[0].workload.port: Input should be less than or equal to 65535",
    ),
    (
        "duplicate keys",
        samples.kubernetes(),
        [samples.replica(), samples.replica(gpu="NVIDIA-L4")],
        f"{R}: externalKey 'dep-7-r0' appears 2 times",
    ),
    (
        "key too long",
        samples.kubernetes(),
        [samples.replica(externalKey="k" * 254)],
        f"{R}[0].externalKey: must be at most 253 bytes, got 254",
    ),
    (
        "key too long in bytes",
        samples.kubernetes(),
        [samples.replica(externalKey="é" * 127)],
        f"{R}[0].externalKey: must be at most 253 bytes, got 254",
    ),
    (
        "empty key",
        samples.kubernetes(),
        [samples.replica(externalKey="")],
        f"{R}[0].externalKey: must not be empty",
    ),
    (
        "argv NUL",
        samples.kubernetes(),
        [samples.replica(runtimeArgs=["--x\x00y"])],
        f"{R}[0].runtimeArgs: entry 0 contains a NUL byte",
    ),
    (
        "argv entry too long",
        samples.kubernetes(),
        [samples.replica(runtimeArgs=["a" * 4097])],
        f"{R}[0].runtimeArgs: entry 0 is longer than 4096 characters",
    ),
    (
        "argv too many",
        samples.kubernetes(),
        [samples.replica(runtimeArgs=["-v"] * 129)],
        f"{R}[0].runtimeArgs: must have at most 128 entries, got 129",
    ),
    (
        "credential in args",
        samples.kubernetes(),
        [samples.replica(runtimeArgs=["--api-key", "${WORKER_API_KEY}"])],
        f"{R}[0].runtimeArgs: entry 1 references ${{WORKER_API_KEY}}",
    ),
    (
        "credential via k8s expansion",
        samples.kubernetes(),
        [samples.replica(runtimeArgs=["--api-key=$(VLLM_API_KEY)"])],
        f"{R}[0].runtimeArgs: entry 0 references $(VLLM_API_KEY)",
    ),
    (
        # A tenant names the model: it once reached the runtime as the worker key.
        "credential as the model",
        samples.kubernetes(),
        [samples.replica(model="$(VLLM_API_KEY)")],
        f"{R}[0].model: references $(VLLM_API_KEY)",
    ),
    (
        "credential as the revision",
        samples.kubernetes(),
        [samples.replica(modelRevision="main$(HF_TOKEN)")],
        f"{R}[0].modelRevision: references $(HF_TOKEN)",
    ),
    (
        "credential in workload command",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(command=["run", "${WORKER_API_KEY}"]))],
        f"{R}[0].workload.command: entry 1 references ${{WORKER_API_KEY}}",
    ),
    (
        "empty workload command",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(command=[]))],
        f"{R}[0].workload.command: Value should have at least 1 item",
    ),
    (
        "unknown placeholder",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(command=["run", "${MODLE}"]))],
        f"{R}[0].workload.command: unknown placeholder ${{MODLE}}",
    ),
    (
        "revision placeholder without revision",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(command=["run", "${MODEL_REVISION}"]))],
        f"{R}[0].workload.command: uses ${{MODEL_REVISION}} but modelRevision is unset",
    ),
    (
        "readiness path relative",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(readinessPath="health"))],
        f"{R}[0].workload.readinessPath: String should match pattern",
    ),
    (
        "negative grace",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(shutdownGraceSeconds=-1))],
        f"{R}[0].workload.shutdownGraceSeconds: Input should be greater than or equal to 0",
    ),
    (
        "gpu resource unqualified",
        samples.kubernetes(gpuResource="gpu"),
        [samples.replica()],
        f"{K}.gpuResource: must be a qualified name",
    ),
    (
        "shm size not a quantity",
        samples.kubernetes(shmSize="lots"),
        [samples.replica()],
        f"{K}.shmSize: must be a memory quantity",
    ),
    (
        "toleration effect",
        samples.kubernetes(tolerations=[{"key": "gpu", "effect": "Never"}]),
        [samples.replica()],
        f"{K}.tolerations[0].effect: Input should be",
    ),
    (
        "kubeconfig contents not a mapping",
        samples.kubernetes(kubeconfig="- just\n- a list\n"),
        [samples.replica()],
        f"{K}.kubeconfig: contents must be a kubeconfig document (a YAML or JSON mapping)",
    ),
    (
        "context absent from kubeconfig contents",
        samples.kubernetes(kubeconfig=samples.KUBECONFIG_CONTENTS, context="elsewhere"),
        [samples.replica()],
        f"{K}.context: context 'elsewhere' is not in the kubeconfig contents",
    ),
    (
        "key with surrounding whitespace",
        samples.kubernetes(),
        [samples.replica(externalKey=" dep-7-r0")],
        f"{R}[0].externalKey: must not start or end with whitespace",
    ),
    (
        "keys differing only in case or whitespace",
        samples.kubernetes(),
        [samples.replica(externalKey="Dep 7"), samples.replica(externalKey="dep  7")],
        f"{R}: externalKeys 'Dep 7', 'dep  7' differ only in case or whitespace",
    ),
    (
        "cpu request not a quantity",
        samples.kubernetes(resources={"cpuRequest": "four"}),
        [samples.replica()],
        f"{K}.resources.cpuRequest: must be a CPU quantity such as '4' or '500m', got 'four'",
    ),
    (
        "memory in a unit Kubernetes does not know",
        samples.kubernetes(resources={"memoryLimit": "32GB"}),
        [samples.replica()],
        f"{K}.resources.memoryLimit: must be a memory quantity such as '16Gi' or '500M', "
        "got '32GB'",
    ),
    (
        "a zero quantity",
        samples.kubernetes(resources={"memoryRequest": "0Gi"}),
        [samples.replica()],
        f"{K}.resources.memoryRequest: must be more than zero, got '0Gi'",
    ),
    (
        "memory limit below the request",
        samples.kubernetes(resources={"memoryRequest": "16Gi", "memoryLimit": "8Gi"}),
        [samples.replica()],
        f"{K}.resources.memoryLimit: 8Gi is below memoryRequest 16Gi",
    ),
    (
        "cpu limit below the request",
        samples.kubernetes(resources={"cpuLimit": "2"}),
        [samples.replica()],
        f"{K}.resources.cpuLimit: 2 is below cpuRequest 4",
    ),
    (
        "memory limit below the request plus /dev/shm",
        samples.kubernetes(shmSize="20Gi"),
        [samples.replica()],
        f"{K}.resources.memoryLimit: 32Gi is below memoryRequest 16Gi plus shmSize 20Gi: "
        "/dev/shm is memory, and a full one counts against the container's memory limit",
    ),
    (
        "an intent's memory limit below the request",
        samples.kubernetes(),
        [samples.replica(resources={"memoryLimit": "12Gi"})],
        f"{R}[0].resources.memoryLimit: 12Gi is below memoryRequest 16Gi",
    ),
    (
        "a startup allowance of zero",
        samples.kubernetes(startupSeconds=0),
        [samples.replica()],
        f"{K}.startupSeconds: Input should be greater than or equal to 1",
    ),
    (
        "an intent's startup allowance of zero",
        samples.kubernetes(),
        [samples.replica(startupSeconds=0)],
        f"{R}[0].startupSeconds: Input should be greater than or equal to 1",
    ),
    (
        "cache claim not a DNS name",
        samples.kubernetes(modelCache={"claimName": "HF_Cache"}),
        [samples.replica()],
        f"{K}.modelCache.claimName: must be a DNS subdomain of at most 253 characters, "
        "got 'HF_Cache'",
    ),
    (
        "cache claim and size both given",
        samples.kubernetes(modelCache={"claimName": "hf", "sizeLimit": "10Gi"}),
        [samples.replica()],
        f"{K}.modelCache: set exactly one of claimName or sizeLimit",
    ),
    (
        "token Secret key not a valid key",
        samples.kubernetes(hfToken={"secretName": "hf", "key": "to/ken"}),
        [samples.replica()],
        f"{K}.hfToken.key: must be [A-Za-z0-9._-] not starting or ending with",
    ),
    (
        "token Secret not a DNS name",
        samples.kubernetes(hfToken={"secretName": "HF", "key": "token"}),
        [samples.replica()],
        f"{K}.hfToken.secretName: must be a DNS subdomain",
    ),
    (
        "the HF token in argv",
        samples.kubernetes(),
        [samples.replica(runtimeArgs=["--hf-token", "$(HF_TOKEN)"])],
        f"{R}[0].runtimeArgs: entry 1 references $(HF_TOKEN)",
    ),
    (
        "root as the runtime user",
        samples.kubernetes(runAsUser=0),
        [samples.replica()],
        f"{K}.runAsUser: Input should be greater than or equal to 1",
    ),
    (
        "read-only root given as a string",
        samples.kubernetes(readOnlyRootFilesystem="yes"),
        [samples.replica()],
        f"{K}.readOnlyRootFilesystem: Input should be a valid boolean",
    ),
    (
        "worker key variable not a variable name",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(workerKey={"env": "1-KEY"}))],
        f"{R}[0].workload.workerKey.env: must be an environment variable name",
    ),
    (
        "worker key variable InferCrane sets",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(workerKey={"env": "HF_TOKEN"}))],
        f"{R}[0].workload.workerKey.env: HF_TOKEN is set by InferCrane; name another variable",
    ),
    (
        "worker key variable expanded in the command",
        samples.kubernetes(),
        [
            samples.replica(
                workload=samples.workload(
                    command=["serve", "--api-key", "$(KEY)"], workerKey={"env": "KEY"}
                )
            )
        ],
        f"{R}[0].workload.command: references $(KEY); the worker credential reaches the "
        "runtime only through its environment",
    ),
    (
        "worker key file not absolute",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(workerKey={"file": "secrets/key"}))],
        f"{R}[0].workload.workerKey.file: must be a normalized absolute path other than '/'",
    ),
    (
        "worker key file in a directory InferCrane mounts",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(workerKey={"file": "/tmp/key"}))],
        f"{R}[0].workload.workerKey.file: /tmp/key would be mounted in /tmp, which InferCrane "
        "uses or which is the root; choose a directory of its own",
    ),
    (
        "worker key both as a variable and a file",
        samples.kubernetes(),
        [samples.replica(workload=samples.workload(workerKey={"env": "K", "file": "/run/k/k"}))],
        f"{R}[0].workload.workerKey: set exactly one of env or file",
    ),
    (
        "replicas not a list",
        samples.kubernetes(),
        {"dep-7-r0": samples.replica()},  # type: ignore[list-item]
        f"{R}: Input should be a valid",
    ),
]


@pytest.mark.parametrize(
    ("kubernetes", "replicas", "expected"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_is_refused_before_anything_is_registered(
    kubernetes: dict[str, Any], replicas: list[Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(kubernetes, replicas)
    assert any(problem.startswith(expected) for problem in refused.value.problems), (
        refused.value.problems
    )

    preflight_calls: list[object] = []
    run = run_program(kubernetes, replicas, preflight=preflight_calls.append)
    assert run.error is not None and expected in str(run.error)
    assert run.registrations == []
    assert preflight_calls == []  # no cluster call either


def test_every_problem_is_reported_together() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(
            {"imageDigest": "vllm:latest", "namespace": "Bad"},
            [samples.replica(port=0), samples.replica(model="")],
        )
    assert sorted(refused.value.problems) == sorted(
        [
            f"{K}.context: is required",
            f"{K}.namespace: must be a DNS label starting with a letter of at most 63 characters, "
            "got 'Bad'",
            f"{K}.imageDigest: must be digest-pinned as <repository>@sha256:<64 lowercase hex>, "
            "got 'vllm:latest'",
            f"{R}[0].port: Input should be greater than or equal to 1",
            f"{R}[1].model: must not be empty",
            f"{R}: externalKey 'dep-7-r0' appears 2 times; keys must be unique",
        ]
    )


def test_defaults_fill_a_minimal_config() -> None:
    config = parse_stack_config(samples.kubernetes(), [samples.replica()])
    settings = config.kubernetes
    assert (settings.namespace, settings.workload_api, settings.service_account) == (
        "infercrane-system",
        "deployment",
        "infercrane-runtime",
    )
    assert (settings.worker_secret_name, settings.worker_secret_key) == (
        "infercrane-worker",
        "api-key",
    )
    assert (settings.gpu_resource, settings.gpu_product_label) == (
        "nvidia.com/gpu",
        "nvidia.com/gpu.product",
    )
    assert config.replicas[0].port == 8000
    assert config.replicas[0].runtime_args == []


def test_image_with_tag_and_digest_is_pinned() -> None:
    image = f"registry.example:5000/team/vllm:v0.9.1@{samples.DIGEST}"
    config = parse_stack_config(samples.kubernetes(imageDigest=image), [samples.replica()])
    assert config.kubernetes.image_digest == image


def test_an_empty_list_is_a_stack_of_no_intents_and_null_is_refused() -> None:
    assert parse_stack_config(samples.kubernetes(), []).replicas == ()
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(samples.kubernetes(), None)
    assert refused.value.problems == (f"{R}: {REQUIRED}",)


REQUIRED = (
    "is required (missing or null is never read as no replicas); `[]` with "
    "infercrane:allowEmpty: true empties the namespace on purpose"
)
DEMO = Path(__file__).parents[2] / "stacks" / "Pulumi.demo.yaml"


def _demo_section() -> dict[str, Any]:
    section: dict[str, Any] = yaml.safe_load(DEMO.read_text(encoding="utf-8"))["config"]
    return section


def _renamed(old: str, new: str) -> dict[str, Any]:
    return {new if key == old else key: value for key, value in _demo_section().items()}


KNOWN = (
    "known: infercrane:allowEmpty, infercrane:kubernetes, infercrane:policy, infercrane:replicas"
)
# The demo stack file with one edit a person makes by accident, and every line it is refused
# with: each read as "no replicas" once, which deleted every replica.
TYPOS: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "the s missing",
        _renamed(R, "infercrane:replica"),
        [
            "infercrane:replica: is not a known key; did you mean infercrane:replicas?",
            f"{R}: {REQUIRED}",
        ],
    ),
    (
        "the namespace misspelt",
        _renamed(R, "infercrance:replicas"),
        [
            "infercrance:replicas: is not read by this program (it reads infercrane: and "
            "pulumi: keys only); did you mean infercrane:replicas?",
            f"{R}: {REQUIRED}",
        ],
    ),
    (
        "the key deleted",
        {key: value for key, value in _demo_section().items() if key != R},
        [f"{R}: {REQUIRED}"],
    ),
    ("null", {**_demo_section(), R: None}, [f"{R}: {REQUIRED}"]),
    (
        "an unknown key beside a good list",
        {**_demo_section(), "infercrane:replicaz": []},
        ["infercrane:replicaz: is not a known key; did you mean infercrane:replicas?"],
    ),
    (
        "a key of no namespace (the project's)",
        {**_demo_section(), "replicas": []},
        [f"replicas: is not a known key; {KNOWN}"],
    ),
    (
        "another package's key",
        {**_demo_section(), "kubernetes:context": "prod"},
        [
            "kubernetes:context: is not read by this program (it reads infercrane: and pulumi: "
            f"keys only); {KNOWN}"
        ],
    ),
    (
        "allowEmpty as a string",
        {**_demo_section(), "infercrane:allowEmpty": "yes"},
        ["infercrane:allowEmpty: Input should be a valid boolean"],
    ),
]


@pytest.mark.parametrize(
    ("section", "expected"), [case[1:] for case in TYPOS], ids=[case[0] for case in TYPOS]
)
def test_a_stack_file_that_does_not_say_what_it_wants_is_refused_by_every_reader(
    section: dict[str, Any], expected: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "Pulumi.demo.yaml"
    path.write_text(yaml.safe_dump({"config": section}), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_stack_file(path)  # render, doctor, diff and every run read it so
    assert list(refused.value.problems) == expected

    # A person's `pulumi up`: the engine hands the program every key of the file.
    run = run_program(None, None, section=section)
    assert isinstance(run.error, Exception)
    assert all(line in str(run.error) for line in expected), run.error
    assert run.registrations == []


def test_the_engines_own_keys_and_allow_empty_are_read() -> None:
    section = {**_demo_section(), "pulumi:tags": {"team": "a"}, "infercrane:allowEmpty": True}
    assert parse_stack_section(section).allow_empty is True
    assert parse_stack_section(_demo_section()).allow_empty is False


def test_kubeconfig_contents_are_accepted_and_never_shown_in_a_repr() -> None:
    config = parse_stack_config(
        samples.kubernetes(kubeconfig=samples.KUBECONFIG_CONTENTS), [samples.replica()]
    )
    assert config.kubernetes.kubeconfig == samples.KUBECONFIG_CONTENTS
    assert "client-key-data" not in repr(config)
    assert "kubeconfig" not in repr(config.kubernetes)


def test_json_kubeconfig_contents_on_one_line_are_accepted() -> None:
    contents = json.dumps(yaml.safe_load(samples.KUBECONFIG_CONTENTS))
    config = parse_stack_config(samples.kubernetes(kubeconfig=contents), [samples.replica()])
    assert config.kubernetes.kubeconfig == contents


def test_resources_take_the_defaults_and_an_intent_overrides_them_field_by_field() -> None:
    config = parse_stack_config(
        samples.kubernetes(resources={"cpuRequest": "8"}),
        [samples.replica(), samples.replica(externalKey="big", resources={"memoryLimit": "64Gi"})],
    )
    settings = config.kubernetes
    assert [effective_resources(settings, intent) for intent in config.replicas] == [
        Resources(cpu_request="8", memory_request="16Gi", memory_limit="32Gi"),
        Resources(cpu_request="8", memory_request="16Gi", memory_limit="64Gi"),
    ]


def test_a_stack_file_with_kubeconfig_contents_in_plain_text_is_refused(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.s.yaml"
    kubernetes = samples.kubernetes(kubeconfig=samples.KUBECONFIG_CONTENTS)
    stack.write_text(
        yaml.safe_dump({"config": {K: kubernetes, R: [samples.replica()]}}), encoding="utf-8"
    )
    with pytest.raises(ConfigError) as refused:
        load_stack_file(stack)
    assert refused.value.problems == (
        f"{K}.kubeconfig: kubeconfig contents in plain text; store them encrypted: "
        f"pulumi config set --secret --path '{K}.kubeconfig' < file",
    )
    assert "client-key-data" not in str(refused.value)


def test_the_program_refuses_plain_kubeconfig_contents_and_runs_with_secret_ones() -> None:
    kubernetes = samples.kubernetes(kubeconfig=samples.KUBECONFIG_CONTENTS)
    plain = run_program(kubernetes, [samples.replica()])
    assert plain.registrations == []
    assert f"{K}.kubeconfig: kubeconfig contents in plain text" in str(plain.error)
    assert "client-key-data" not in str(plain.error)
    secret = run_program(kubernetes, [samples.replica()], secret_keys=(K,))
    assert secret.error is None and secret.kubernetes_objects != []


def test_a_stack_file_with_an_encrypted_kubeconfig_still_loads(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.s.yaml"
    kubernetes = samples.kubernetes(kubeconfig={"secure": "v1:abc:def"})
    stack.write_text(
        yaml.safe_dump({"config": {K: kubernetes, R: [samples.replica()]}}), encoding="utf-8"
    )
    assert load_stack_file(stack).kubernetes.kubeconfig is None


def test_over_bound_inputs_are_refused_in_one_line_before_anything_is_rendered(
    tmp_path: Path,
) -> None:
    """No bound on a string's length or the number of intents, and YAML aliases expanding as
    often as used: a 218 KB file rendered 81 MB of objects against a runner of 1 GiB."""
    long = "m" * 1025
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(samples.kubernetes(), [samples.replica(model=long)])
    assert refused.value.problems == (f"{R}[0].model: must be at most 1024 characters, got 1025",)

    many = [samples.replica(externalKey=f"k{i}") for i in range(2001)]
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(samples.kubernetes(), many)
    [line] = refused.value.problems
    assert line.startswith(f"{R}: ") and "at most 2000" in line

    # Ten lists of ten of the one before, six deep: a million values from a few hundred bytes.
    bomb = "".join(f"  l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]\n" for n in range(1, 7))
    aliased = tmp_path / "Pulumi.aliased.yaml"
    aliased.write_text(
        "config:\n"
        f"  {K}: {json.dumps(samples.kubernetes())}\n"
        f"  {R}: []\n"
        f"bomb:\n  l0: &l0 [x]\n{bomb}"
    )
    with pytest.raises(ConfigError) as refused:
        load_stack_file(aliased)
    assert refused.value.problems == (
        f"{aliased}: expands to more than 1,000,000 values (YAML aliases?); write each value out",
    )


def test_an_object_pyyaml_wrote_twice_as_an_alias_is_read_as_written(tmp_path: Path) -> None:
    """PyYAML writes one object met twice as an anchor and an alias (a control plane's shared
    resources dict): such a file is read, its values as if written out."""
    resources = {"memoryLimit": "64Gi"}
    replicas = [samples.replica(externalKey=k, resources=resources) for k in ("a", "b")]
    text = yaml.safe_dump({"config": {K: samples.kubernetes(), R: replicas}})
    assert "*id001" in text
    path = tmp_path / "Pulumi.shared.yaml"
    path.write_text(text)
    config = load_stack_file(path)
    assert [intent.resources.memory_limit for intent in config.replicas] == ["64Gi", "64Gi"]

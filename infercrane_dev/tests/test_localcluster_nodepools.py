"""Node pool specs, simulated Node manifests, the kwok Stage file and the network ranges."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from infercrane_dev.localcluster import certs, kwok
from infercrane_dev.localcluster.__main__ import main
from infercrane_dev.localcluster.nodepools import (
    NodePool,
    NodePoolError,
    PoolNode,
    node_index,
    node_manifest,
    node_name,
    parse_node_pool,
    parse_node_pools,
    pool_manifests,
    pool_node,
    validate_label_name,
)


@pytest.mark.parametrize(
    ("spec", "pool"),
    [
        ("NVIDIA-L40S=2x1", NodePool("NVIDIA-L40S", 2, 1)),
        ("NVIDIA-H100-80GB-HBM3=1x8", NodePool("NVIDIA-H100-80GB-HBM3", 1, 8)),
        ("Tesla_T4.v2=3x4", NodePool("Tesla_T4.v2", 3, 4)),
    ],
)
def test_parse_node_pool(spec: str, pool: NodePool) -> None:
    assert parse_node_pool(spec) == pool
    assert pool.spec == spec


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "NVIDIA-L40S",
            "node pool 'NVIDIA-L40S': expected PRODUCT=NODESxGPUS, e.g. NVIDIA-L40S=2x1",
        ),
        ("NVIDIA-L40S=2", "node pool 'NVIDIA-L40S=2': expected PRODUCT=NODESxGPUS"),
        ("NVIDIA-L40S=2x", "expected PRODUCT=NODESxGPUS"),
        ("NVIDIA-L40S=-1x1", "expected PRODUCT=NODESxGPUS"),
        ("NVIDIA-L40S=2X1", "expected PRODUCT=NODESxGPUS"),
        ("NVIDIA-L40S= 2x1", "expected PRODUCT=NODESxGPUS"),
        ("A=B=1x1", "GPU product 'A=B' is not a valid Kubernetes label value"),
        ("=1x1", "node pool '=1x1': GPU product '' is empty"),
        ("NVIDIA L40S=1x1", "GPU product 'NVIDIA L40S' is not a valid Kubernetes label value"),
        ("-NVIDIA=1x1", "GPU product '-NVIDIA' is not a valid Kubernetes label value"),
        ("NVIDIA.=1x1", "GPU product 'NVIDIA.' is not a valid Kubernetes label value"),
        ("A" * 64 + "=1x1", "is 64 characters long; a label value has at most 63"),
        (
            "NVIDIA-L40S=0x1",
            "node pool 'NVIDIA-L40S=0x1': node count of NVIDIA-L40S must be 1..1000, got 0",
        ),
        ("NVIDIA-L40S=1x0", "GPUs per node of NVIDIA-L40S must be 1..64, got 0"),
        ("NVIDIA-L40S=1001x1", "node count of NVIDIA-L40S must be 1..1000, got 1001"),
        ("NVIDIA-L40S=1x65", "GPUs per node of NVIDIA-L40S must be 1..64, got 65"),
    ],
)
def test_bad_node_pool_is_one_line_naming_the_input(spec: str, message: str) -> None:
    with pytest.raises(NodePoolError) as info:
        parse_node_pool(spec)
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_same_product_twice_is_refused() -> None:
    with pytest.raises(NodePoolError, match="product A is already given as 'A=1x1'"):
        parse_node_pools(["A=1x1", "B=1x1", "A=2x1"])
    assert parse_node_pools(["A=1x1", "B=2x8"]) == (NodePool("A", 1, 1), NodePool("B", 2, 8))


def test_node_pool_validates_when_built_directly() -> None:
    with pytest.raises(NodePoolError, match="node count"):
        NodePool("NVIDIA-L4", 0, 1)


@pytest.mark.parametrize(
    "name", ["nvidia.com/gpu.product", "gpu", "cloud.google.com/gke-accelerator", "a_b.c-d"]
)
def test_valid_label_names(name: str) -> None:
    assert validate_label_name(name) == name


@pytest.mark.parametrize("name", ["", "a/b/c", "/gpu", "Example.COM/gpu", "nvidia.com/", "-x"])
def test_invalid_label_names(name: str) -> None:
    with pytest.raises(NodePoolError, match="label name"):
        validate_label_name(name)


def test_node_names_derive_from_the_product() -> None:
    assert node_name("NVIDIA-L40S", 0) == "gpu-nvidia-l40s-0"
    assert node_name("NVIDIA-H100-80GB-HBM3", 7) == "gpu-nvidia-h100-80gb-hbm3-7"
    assert node_name("Tesla_T4..v2", 1) == "gpu-tesla-t4-v2-1"
    assert node_index("NVIDIA-L40S", "gpu-nvidia-l40s-12") == 12
    assert node_index("NVIDIA-L40S", "gpu-nvidia-l40s-012") is None
    assert node_index("NVIDIA-L40S", "gpu-nvidia-l40s-x") is None
    assert node_index("NVIDIA-L4", "gpu-nvidia-l40s-1") is None


def test_node_manifest_is_exactly_what_the_scheduler_needs() -> None:
    assert node_manifest(NodePool("NVIDIA-L40S", 2, 4), 1) == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-nvidia-l40s-1",
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": "gpu-nvidia-l40s-1",
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.product": "NVIDIA-L40S",
                "infercrane.dev/simulated-node": "kwok",
            },
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"},
        },
    }


def test_product_label_is_configurable() -> None:
    labels = node_manifest(
        NodePool("nvidia-tesla-t4", 1, 1), 0, product_label="cloud.google.com/gke-accelerator"
    )["metadata"]["labels"]
    assert labels["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
    assert "nvidia.com/gpu.product" not in labels


def test_pool_manifests_continue_after_existing_nodes() -> None:
    pool = NodePool("NVIDIA-L40S", 2, 1)
    fresh = [m["metadata"]["name"] for m in pool_manifests(pool, [])]
    assert fresh == ["gpu-nvidia-l40s-0", "gpu-nvidia-l40s-1"]
    existing = ["gpu-nvidia-l40s-0", "gpu-nvidia-l40s-3", "gpu-nvidia-h100-0"]
    grown = [m["metadata"]["name"] for m in pool_manifests(pool, existing)]
    assert grown == ["gpu-nvidia-l40s-4", "gpu-nvidia-l40s-5"]
    # Two products with one slug share the numbering, so names never collide.
    twin = [m["metadata"]["name"] for m in pool_manifests(NodePool("NVIDIA_L40S", 1, 1), existing)]
    assert twin == ["gpu-nvidia-l40s-4"]


def _api_node(conditions: list[dict[str, str]], taints: list[dict[str, str]]) -> dict[str, object]:
    manifest = node_manifest(NodePool("NVIDIA-L40S", 1, 2), 0)
    manifest["spec"] = {"taints": taints}
    manifest["status"]["conditions"] = conditions
    return manifest


def test_pool_node_summary() -> None:
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    ready = [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]
    assert pool_node(_api_node(ready, [gpu_taint])) == PoolNode(
        name="gpu-nvidia-l40s-0", product="NVIDIA-L40S", gpus=2, ready=True, schedulable=True
    )
    assert pool_node(_api_node(ready, [gpu_taint, not_ready])).schedulable is False
    assert pool_node(_api_node([{"type": "Ready", "status": "Unknown"}], [])).ready is False
    assert pool_node({"metadata": {"name": "bare"}}) == PoolNode(
        name="bare", product="", gpus=0, ready=False, schedulable=True
    )


# -- kwok -------------------------------------------------------------------------


def test_stage_file_loads_with_every_stage_we_rely_on() -> None:
    stages = kwok.load_stages()
    by_name = {s["metadata"]["name"]: s for s in stages}
    assert sorted(by_name) == [
        "node-heartbeat",
        "node-ready",
        "pod-delete",
        "pod-ready",
        "pod-running",
    ]
    kinds = {name: s["spec"]["resourceRef"] for name, s in by_name.items()}
    assert kinds == {
        "node-ready": {"apiGroup": "v1", "kind": "Node"},
        "node-heartbeat": {"apiGroup": "v1", "kind": "Node"},
        "pod-running": {"apiGroup": "v1", "kind": "Pod"},
        "pod-ready": {"apiGroup": "v1", "kind": "Pod"},
        "pod-delete": {"apiGroup": "v1", "kind": "Pod"},
    }
    assert by_name["pod-delete"]["spec"]["next"]["delete"] is True
    ready_delay = by_name["pod-ready"]["spec"]["delay"]["durationFrom"]["jq"]["expression"]
    # The readiness delay follows the probe unless a Pod overrides it.
    for term in (
        'infercrane.dev/simulated-ready-after"]',
        "initialDelaySeconds",
        "periodSeconds // 10",
    ):
        assert term in ready_delay


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no Stage documents"),
        ("kind: ConfigMap\n", "every document must be a Stage"),
        (
            "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: a}\n",
            "needs resourceRef",
        ),
        ("kind: Stage\nmetadata: {name: a}\nspec: {}\n", "lacks kwok.x-k8s.io/v1alpha1"),
        ("[unclosed", "cannot read kwok stages"),
    ],
)
def test_bad_stage_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "stages.yaml"
    path.write_text(text)
    with pytest.raises(kwok.StageFileError, match=message):
        kwok.load_stages(path)


def test_duplicate_stage_names_are_refused(tmp_path: Path) -> None:
    stage = yaml.safe_load_all(kwok.STAGES_FILE.read_text())
    first = next(iter(stage))
    path = tmp_path / "stages.yaml"
    path.write_text(yaml.safe_dump_all([first, first]))
    with pytest.raises(kwok.StageFileError, match="unique name"):
        kwok.load_stages(path)


def test_networks_do_not_overlap() -> None:
    assert certs.SERVICE_CLUSTER_IP_RANGE == "10.96.0.0/12"
    assert certs.KUBERNETES_SERVICE_IP == "10.96.0.1"
    assert ipaddress.ip_network(certs.SERVICE_CLUSTER_IP_RANGE).num_addresses > 100_000
    assert kwok.networks_disjoint()


def test_kwok_args_manage_only_labelled_nodes(tmp_path: Path) -> None:
    args = kwok.kwok_args(tmp_path / "kwok.kubeconfig", 4321)
    assert args == [
        f"--kubeconfig={tmp_path / 'kwok.kubeconfig'}",
        f"--config={kwok.STAGES_FILE}",
        "--manage-nodes-with-label-selector=infercrane.dev/simulated-node=kwok",
        "--cidr=10.244.0.0/16",
        "--node-ip=10.89.0.1",
        "--node-lease-duration-seconds=40",
        "--server-address=127.0.0.1:4321",
    ]


# -- CLI input errors (exit 2, one line, nothing started) -------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["up", "--node-pool", "NVIDIA-L40S=2"], "expected PRODUCT=NODESxGPUS"),
        (["up", "--node-pool", "bad product=1x1"], "not a valid Kubernetes label value"),
        (["up", "--node-pool", "A=0x1"], "node count of A must be 1..1000, got 0"),
        (["up", "--node-pool", "A=1x1", "--node-pool", "A=1x2"], "already given"),
        (["up", "--gpu-product-label", "a/b/c"], "label name 'a/b/c'"),
        (["add-pool", "--node-pool", "A=1"], "expected PRODUCT=NODESxGPUS"),
        (["nodes", "--dir", "x", "--kubeconfig", "y"], "either --dir or --kubeconfig"),
    ],
)
def test_cli_rejects_bad_input_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    argv = [*argv, "--dir", str(tmp_path / "state")] if "--dir" not in argv else argv
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""
    assert not (tmp_path / "state").exists()


def test_cli_node_commands_without_cluster_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = str(tmp_path / "state")
    assert main(["nodes", "--dir", state_dir]) == 1
    assert main(["delete-node", "gpu-x-0", "--dir", state_dir]) == 1
    assert main(["add-pool", "--node-pool", "A=1x1", "--dir", state_dir]) == 1
    assert capsys.readouterr().err.count("no running local control plane recorded in") == 3

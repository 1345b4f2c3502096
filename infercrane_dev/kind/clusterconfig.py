"""What a Kind cluster of ours is, as data (pure, no I/O): kind's cluster configuration and
the fake-GPU device plugin's DaemonSet.

One control-plane node and, per GPU pool (``PRODUCT=NODESxGPUS``, as the local control plane's
simulated pools), that many workers, each labelled with the product and tainted
``nvidia.com/gpu=present:NoSchedule`` as GKE taints GPU nodes; the API server runs the
``ExtendedResourceToleration`` admission plugin (beside kubeadm's default ``NodeRestriction``),
which gives every Pod asking for ``nvidia.com/gpu`` the matching toleration, so GPU workloads
schedule there unchanged. Their GPUs come from our device plugin run as a DaemonSet on the pool's
nodes, as NVIDIA's runs on a GPU cluster. The kubelet must accept cgroup v1 (``failCgroupV1:
false``): this kind of machine has it, and kubelet 1.36 refuses it by default. kindnetd is
replaced (:mod:`.network`), so kind installs no CNI. With KServe (``kserve``), one more worker
without GPUs, label or taint runs its controller, as a GPU cluster's CPU pool runs controllers:
every other node is tainted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from infercrane_dev.localcluster.deviceplugin import DEVICE_PLUGIN_DIR, device_plugin_args
from infercrane_dev.localcluster.nodepools import (
    DEFAULT_PRODUCT_LABEL,
    GPU_TAINT,
    NodePool,
    product_slug,
)

DEFAULT_NAME = "infercrane"
DEFAULT_POOLS = (NodePool("NVIDIA-L4", 1, 2),)
POD_SUBNET = "10.244.0.0/16"
SERVICE_SUBNET = "10.96.0.0/12"
ADMISSION_PLUGINS = "NodeRestriction,ExtendedResourceToleration"
DEVICE_PLUGIN_NAMESPACE = "kube-system"
DEVICE_PLUGIN_APP = "infercrane-gpu-device-plugin"


@dataclass(frozen=True)
class KindSpec:
    kubernetes_version: str
    name: str = DEFAULT_NAME
    pools: tuple[NodePool, ...] = DEFAULT_POOLS
    product_label: str = DEFAULT_PRODUCT_LABEL
    kserve: bool = False

    @property
    def context(self) -> str:
        """The admin context kind writes into the kubeconfig."""
        return f"kind-{self.name}"


def _worker(pool: NodePool, product_label: str) -> dict[str, Any]:
    join = {
        "kind": "JoinConfiguration",
        "nodeRegistration": {"taints": [dict(GPU_TAINT)]},
    }
    return {
        "role": "worker",
        "labels": {product_label: pool.product},
        "kubeadmConfigPatches": [yaml.safe_dump(join)],
    }


def kind_config(spec: KindSpec) -> dict[str, Any]:
    """kind's ``Cluster`` configuration (v1alpha4)."""
    # syncFrequency: a ConfigMap's new contents reach its Pods' volumes at the kubelet's next
    # sync of the Pod; 10 s instead of a minute, so that a stack file edited in the runner's
    # ConfigMap (deploy/kubernetes/runner) is applied within seconds.
    kubelet = {"kind": "KubeletConfiguration", "failCgroupV1": False, "syncFrequency": "10s"}
    admission = [
        {
            "op": "add",
            "path": "/apiServer/extraArgs/-",
            "value": {"name": "enable-admission-plugins", "value": ADMISSION_PLUGINS},
        }
    ]
    return {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "networking": {
            "disableDefaultCNI": True,
            "podSubnet": POD_SUBNET,
            "serviceSubnet": SERVICE_SUBNET,
        },
        "kubeadmConfigPatches": [yaml.safe_dump(kubelet)],
        "kubeadmConfigPatchesJSON6902": [
            {
                "group": "kubeadm.k8s.io",
                "version": "v1beta4",
                "kind": "ClusterConfiguration",
                "patch": yaml.safe_dump(admission),
            }
        ],
        "nodes": [
            {"role": "control-plane"},
            *(_worker(pool, spec.product_label) for pool in spec.pools for _ in range(pool.nodes)),
            # Last: the GPU workers keep kind's first names (infercrane-worker, ...).
            *([{"role": "worker"}] if spec.kserve else []),
        ],
    }


def device_plugin_daemonset(pool: NodePool, *, image: str, product_label: str) -> dict[str, Any]:
    """The device plugin on every node of ``pool``, advertising its GPUs to the kubelet."""
    labels = {
        "app.kubernetes.io/name": DEVICE_PLUGIN_APP,
        "infercrane.dev/gpu-pool": product_slug(pool.product),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": f"{DEVICE_PLUGIN_APP}-{product_slug(pool.product)}",
            "namespace": DEVICE_PLUGIN_NAMESPACE,
            "labels": labels,
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {product_label: pool.product},
                    "priorityClassName": "system-node-critical",
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "device-plugin",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": device_plugin_args(
                                product=pool.product, gpus=pool.gpus_per_node
                            ),
                            "volumeMounts": [
                                {"name": "device-plugins", "mountPath": str(DEVICE_PLUGIN_DIR)}
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "device-plugins",
                            "hostPath": {"path": str(DEVICE_PLUGIN_DIR), "type": "Directory"},
                        }
                    ],
                },
            },
        },
    }

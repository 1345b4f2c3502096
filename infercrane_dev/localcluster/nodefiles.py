"""Writes the real node's files into its workdir before any of its daemons starts.

containerd's configuration and registry redirect, the CNI plugins and network list, the
kubelet's configuration and kubeconfig, kube-proxy's: rendered by the pure component modules
(:mod:`.containerd`, :mod:`.hostnet`, :mod:`.kubelet`, :mod:`.kubeproxy`), placed here as
:class:`.layout.NodeLayout` says.  The kubelet and kube-proxy get client certificates of the
cluster CA for their identities (:mod:`.certs`).  Nothing outside the node's workdir is written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from infercrane_dev.toolchain import SYSTEM_PATH, find_binary

from . import containerd, hostnet
from .certs import (
    KUBE_PROXY_USER,
    KUBELET_GROUPS,
    CertificateAuthority,
    issue_client_cert,
    kubelet_user,
)
from .kubeconfig import write_daemon_kubeconfig
from .kubelet import kubelet_config
from .kubeproxy import kube_proxy_config
from .layout import NodeLayout
from .realnodes import node_taints


def write_node_files(
    layout: NodeLayout,
    *,
    node_name: str,
    server: str,
    ca: CertificateAuthority,
    ca_file: Path,
    sandbox_image: str,
) -> None:
    """Everything the node's daemons read, for the Node ``node_name`` of the cluster at
    ``server`` whose CA is ``ca`` (also in ``ca_file``); ``sandbox_image`` is every Pod's."""
    paths = layout.containerd
    for directory in (paths.base, layout.cni_bin, layout.cni_conf, layout.kubelet.base):
        directory.mkdir(parents=True, exist_ok=True)
    runc = shutil.which("runc", path=SYSTEM_PATH)
    assert runc is not None  # hostchecks.unavailable() checked it
    config = containerd.containerd_config(
        paths,
        runc=Path(runc),
        sandbox_image=sandbox_image,
        cni_bin_dir=layout.cni_bin,
        cni_conf_dir=layout.cni_conf,
    )
    paths.config.write_text(containerd.to_toml(config), encoding="utf-8")
    hosts = paths.registry_hosts / "_default" / "hosts.toml"
    hosts.parent.mkdir(parents=True)
    hosts.write_text(containerd.to_toml(containerd.registry_hosts()), encoding="utf-8")
    for plugin in hostnet.CNI_PLUGINS:
        (layout.cni_bin / plugin).symlink_to(find_binary(plugin))
    conflist = layout.cni_conf / "10-infercrane.conflist"
    conflist.write_text(
        json.dumps(hostnet.cni_conflist(layout.cni_ipam), indent=2), encoding="utf-8"
    )
    kubelet = layout.kubelet
    kubelet.config.write_text(
        yaml.safe_dump(
            kubelet_config(
                kubelet,
                runtime_endpoint=f"unix://{paths.address}",
                client_ca=ca_file,
                node_ip=hostnet.NODE_IP,
                taints=node_taints(),
            )
        ),
        encoding="utf-8",
    )
    node_user = kubelet_user(node_name)
    write_daemon_kubeconfig(
        kubelet.kubeconfig,
        server,
        ca.cert_pem,
        node_user,
        issue_client_cert(ca, node_user, KUBELET_GROUPS),
    )
    write_daemon_kubeconfig(
        layout.kube_proxy_kubeconfig,
        server,
        ca.cert_pem,
        KUBE_PROXY_USER,
        issue_client_cert(ca, KUBE_PROXY_USER),
    )
    layout.kube_proxy_config.write_text(
        yaml.safe_dump(
            kube_proxy_config(
                kubeconfig=layout.kube_proxy_kubeconfig,
                node_name=node_name,
                cluster_cidr=hostnet.POD_SUBNET,
                node_ip=hostnet.NODE_IP,
            )
        ),
        encoding="utf-8",
    )

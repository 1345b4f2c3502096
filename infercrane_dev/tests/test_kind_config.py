"""The Kind tooling's decisions as values: the cluster's configuration, the device plugin's
DaemonSet, the Pod network, dockerd's configuration, the node image's files and settings, the
Kubernetes images' references and versions, the base's package checks, the runtime record and
the CLI's refusals (no Docker, no root, no binary needed)."""

from __future__ import annotations

import io
import json
import lzma
import os
import tarfile
from pathlib import Path

import pytest
import yaml

from infercrane_dev.images.catalog import Executable, Packaged, Symlink, Text
from infercrane_dev.images.debs import DebError, DebPin, files, read_files
from infercrane_dev.images.ocilayout import Member, Platform, image_archive
from infercrane_dev.kind import __main__ as cli
from infercrane_dev.kind import baseimage, hostchecks, kubeimages, network, nodeimage
from infercrane_dev.kind.cluster import KindRuntime
from infercrane_dev.kind.clusterconfig import KindSpec, device_plugin_daemonset, kind_config
from infercrane_dev.kind.docker import DockerPaths, client_env, daemon_config
from infercrane_dev.localcluster import hostlock
from infercrane_dev.localcluster.hoststate import HostBaseline
from infercrane_dev.localcluster.nodepools import NodePool
from infercrane_dev.localcluster.processes import ManagedProcess, stop_process

TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def test_kind_config_has_a_control_plane_and_a_tainted_labelled_worker_per_pool_node() -> None:
    spec = KindSpec("v1.36.3", pools=(NodePool("NVIDIA-L4", 2, 2), NodePool("NVIDIA-L40S", 1, 1)))
    config = kind_config(spec)
    assert config["networking"] == {
        "disableDefaultCNI": True,
        "podSubnet": "10.244.0.0/16",
        "serviceSubnet": "10.96.0.0/12",
    }
    assert [yaml.safe_load(p) for p in config["kubeadmConfigPatches"]] == [
        {"kind": "KubeletConfiguration", "failCgroupV1": False, "syncFrequency": "10s"}
    ]
    [admission] = config["kubeadmConfigPatchesJSON6902"]
    assert (admission["kind"], admission["version"]) == ("ClusterConfiguration", "v1beta4")
    assert yaml.safe_load(admission["patch"]) == [
        {
            "op": "add",
            "path": "/apiServer/extraArgs/-",
            "value": {
                "name": "enable-admission-plugins",
                "value": "NodeRestriction,ExtendedResourceToleration",
            },
        }
    ]
    nodes = config["nodes"]
    assert nodes[0] == {"role": "control-plane"}
    assert [(n["role"], n["labels"]) for n in nodes[1:]] == [
        ("worker", {"nvidia.com/gpu.product": "NVIDIA-L4"}),
        ("worker", {"nvidia.com/gpu.product": "NVIDIA-L4"}),
        ("worker", {"nvidia.com/gpu.product": "NVIDIA-L40S"}),
    ]
    assert yaml.safe_load(nodes[1]["kubeadmConfigPatches"][0]) == {
        "kind": "JoinConfiguration",
        "nodeRegistration": {"taints": [TAINT]},
    }
    assert spec.context == "kind-infercrane"


def test_the_device_plugin_runs_on_its_pools_nodes_with_their_gpu_count() -> None:
    daemonset = device_plugin_daemonset(
        NodePool("NVIDIA-L40S", 1, 4), image="img@sha256:ab", product_label="nvidia.com/gpu.product"
    )
    assert daemonset["metadata"]["name"] == "infercrane-gpu-device-plugin-nvidia-l40s"
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert pod["tolerations"] == [{"operator": "Exists"}]
    [container] = pod["containers"]
    assert container["image"] == "img@sha256:ab"
    assert "--count=4" in container["args"] and "--product=NVIDIA-L40S" in container["args"]
    assert container["volumeMounts"][0]["mountPath"] == "/var/lib/kubelet/device-plugins"
    assert daemonset["spec"]["selector"]["matchLabels"] == daemonset["metadata"]["labels"]


def test_each_node_gets_a_bridge_on_its_range_and_routes_to_the_others() -> None:
    nodes = [
        network.NodeAddress("cp", "172.18.0.2", "10.244.0.0/24"),
        network.NodeAddress("w1", "172.18.0.3", "10.244.1.0/24"),
        network.NodeAddress("w2", "172.18.0.4", "10.244.2.0/24"),
    ]
    planned = network.node_networks(nodes)
    assert planned["w1"].routes == (
        ("10.244.0.0/24", "172.18.0.2"),
        ("10.244.2.0/24", "172.18.0.4"),
    )
    [bridge] = planned["w1"].conflist["plugins"]
    assert (bridge["type"], bridge["isGateway"], bridge["ipMasq"]) == ("bridge", True, False)
    assert bridge["ipam"] == {
        "type": "host-local",
        "ranges": [[{"subnet": "10.244.1.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
    }
    assert network.node_networks(nodes[:1])["cp"].routes == ()
    # The routes are a unit of the node's, so every start of the node puts them back.
    assert network.routes_unit(planned["w1"].routes).splitlines() == [
        "[Unit]",
        "Description=InferCrane: routes to the other nodes' Pod ranges (kindnetd's job)",
        "Before=kubelet.service",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=/usr/sbin/ip route replace 10.244.0.0/24 via 172.18.0.2",
        "ExecStart=/usr/sbin/ip route replace 10.244.2.0/24 via 172.18.0.4",
        "[Install]",
        "WantedBy=multi-user.target",
    ]


def test_dockerd_keeps_everything_in_our_directories_and_leaves_the_host_network_alone() -> None:
    paths = DockerPaths(Path("/w"), Path("/cache/docker"))
    config = daemon_config(paths, Path("/bin/capfilter"))
    assert {k: config[k] for k in ("data-root", "exec-root", "pidfile", "deprecated-key-path")} == {
        "data-root": "/cache/docker",
        "exec-root": "/w/x",
        "pidfile": "/w/dockerd.pid",
        "deprecated-key-path": "/w/key.json",
    }
    assert config["hosts"] == ["unix:///w/docker.sock"]
    assert (config["bridge"], config["iptables"], config["ip-forward"], config["ip-masq"]) == (
        "none",
        False,
        False,
        False,
    )
    assert config["runtimes"][config["default-runtime"]] == {"path": "/bin/capfilter"}
    env = client_env(paths, {"HOME": "/root", "DOCKER_HOST": "tcp://x", "PATH": "/usr/local/bin"})
    assert env == {
        "HOME": "/root",
        "DOCKER_HOST": "unix:///w/docker.sock",
        "DOCKER_CONFIG": "/w/docker-client",
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }


KIND_CONTAINERD = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = false
"""


def test_containerd_config_restricts_oom_scores_and_names_kubeadms_pause() -> None:
    assert nodeimage.containerd_config(KIND_CONTAINERD, "registry.k8s.io/pause:3.10.2") == (
        KIND_CONTAINERD.replace("3.10", "3.10.2").replace("= false", "= true")
    )
    with pytest.raises(nodeimage.NodeImageError, match="restrict_oom_score_adj = false"):
        nodeimage.containerd_config("version = 2\n", "p")


def test_cri_base_spec_adds_kinds_hook_and_drops_rlimits() -> None:
    spec = {"process": {"rlimits": [{"type": "RLIMIT_NOFILE"}], "cwd": "/"}, "hooks": {}}
    assert nodeimage.cri_base_spec(spec) == {
        "process": {"cwd": "/"},
        "hooks": {"createContainer": [{"path": "/kind/bin/mount-product-files.sh"}]},
    }
    assert spec["process"]["rlimits"]  # the input is left alone


def test_node_entries_give_kinds_files_their_modes_and_place_the_binaries(tmp_path: Path) -> None:
    kind = tmp_path / "kind-node"
    for relative, text in {
        "etc/containerd/config.toml": KIND_CONTAINERD,
        "etc/crictl.yaml": "runtime-endpoint: x\n",
        "kind/bin/mount-product-files.sh": "#!/bin/bash\n",
        "usr/local/bin/entrypoint": "#!/bin/bash\n",
    }.items():
        (kind / relative).parent.mkdir(parents=True, exist_ok=True)
        (kind / relative).write_text(text)
    entries = nodeimage.node_entries(
        tmp_path, kubernetes_version="v1.36.3", sandbox_image="p:1", cri_base={"a": 1}
    )
    by_path = {e.path: e for e in entries if not isinstance(e, Packaged)}
    assert by_path["usr/local/bin/entrypoint"] == Executable(
        "usr/local/bin/entrypoint", "kind-node/usr/local/bin/entrypoint"
    )
    assert by_path["etc/crictl.yaml"] == Text("etc/crictl.yaml", "runtime-endpoint: x\n")
    assert 'sandbox_image = "p:1"' in by_path["etc/containerd/config.toml"].content  # type: ignore[union-attr]
    assert by_path["kind/version"] == Text("kind/version", "v1.36.3")
    assert by_path["usr/bin/kubeadm"] == Executable("usr/bin/kubeadm", "kubeadm")
    assert by_path["opt/cni/bin/bridge"] == Executable("opt/cni/bin/bridge", "bridge")
    assert by_path["etc/systemd/system/multi-user.target.wants/kubelet.service"] == Symlink(
        "etc/systemd/system/multi-user.target.wants/kubelet.service",
        "/etc/systemd/system/kubelet.service",
    )


@pytest.mark.parametrize(
    ("reference", "repository", "tag", "version"),
    [
        (
            "registry.k8s.io/kube-apiserver:v1.36.3",
            "registry.k8s.io/kube-apiserver",
            "v1.36.3",
            "v1.36.3",
        ),
        ("registry.k8s.io/etcd:3.6.8-0", "registry.k8s.io/etcd", "3.6.8-0", "3.6.8"),
        (
            "registry.k8s.io/coredns/coredns:v1.14.2",
            "registry.k8s.io/coredns/coredns",
            "v1.14.2",
            "1.14.2",
        ),
        ("registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause", "3.10.2", None),
    ],
)
def test_a_kubeadm_reference_names_the_binary_version_it_needs(
    reference: str, repository: str, tag: str, version: str | None
) -> None:
    assert kubeimages.split_reference(reference) == (repository, tag)
    assert kubeimages.expected_version(repository, tag) == version
    assert kubeimages.image_spec(repository).layers


def test_binary_versions_are_read_from_each_programs_own_words() -> None:
    assert kubeimages.binary_version("kube-proxy", "Kubernetes v1.36.3\n") == "v1.36.3"
    assert kubeimages.binary_version("etcd", "etcd Version: 3.6.8\nGit SHA: x\n") == "3.6.8"
    assert kubeimages.binary_version("coredns", "CoreDNS-1.14.2\nlinux/amd64\n") == "1.14.2"
    assert kubeimages.binary_version("etcd", "nonsense") is None
    with pytest.raises(kubeimages.KubeImagesError, match="no recipe"):
        kubeimages.image_spec("registry.k8s.io/kindnetd")
    with pytest.raises(kubeimages.KubeImagesError, match="not a tagged reference"):
        kubeimages.split_reference("registry.k8s.io/pause")


def test_kube_proxys_iptables_is_the_nf_tables_backend() -> None:
    links = {e.path: e.target for e in kubeimages.IPTABLES.entries if isinstance(e, Symlink)}
    assert links == {
        "usr/sbin/iptables": "iptables-nft",
        "usr/sbin/iptables-save": "iptables-nft-save",
        "usr/sbin/iptables-restore": "iptables-nft-restore",
        "usr/sbin/ip6tables": "ip6tables-nft",
        "usr/sbin/ip6tables-save": "ip6tables-nft-save",
        "usr/sbin/ip6tables-restore": "ip6tables-nft-restore",
    }


def _deb(path: Path, members: dict[str, bytes | str]) -> Path:
    """A minimal .deb: ar of debian-binary, control and an xz data tar (str: a symlink)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(f"./{name}")
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), 0o755
                tar.addfile(info, io.BytesIO(content))
    blobs = [("debian-binary", b"2.0\n"), ("data.tar.xz", lzma.compress(data.getvalue()))]
    out = b"!<arch>\n"
    for name, blob in blobs:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(blob):<10}`\n".encode() + blob
        out += b"\n" * (len(blob) % 2)
    path.write_bytes(out)
    return path


def test_a_debs_files_are_read_by_pattern_and_a_pattern_matching_nothing_is_refused(
    tmp_path: Path,
) -> None:
    deb = _deb(
        tmp_path / "x.deb",
        {
            "usr/sbin/xtables-multi": b"ELF",
            "usr/sbin/iptables-nft": "xtables-multi",
            "usr/share/doc/x": b"d",
        },
    )
    assert read_files(deb, ["/usr/sbin/*"]) == [
        Member("usr/sbin/xtables-multi", 0o755, b"ELF"),
        Member("usr/sbin/iptables-nft", 0o777, link="xtables-multi"),
    ]
    with pytest.raises(DebError, match="x: no file matches /lib/nothing"):
        files({"x": deb}, "x", ["/usr/sbin/*", "/lib/nothing"])
    assert DebPin("libc6", "1:2.36", "ab").filename == "libc6_1%3a2.36_amd64.deb"


def test_the_base_checks_its_installed_packages_against_the_recorded_list(tmp_path: Path) -> None:
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text(
        "Package: bash\nStatus: install ok installed\nVersion: 5.2\nDescription: x\n y\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n"
        "Package: adduser\nStatus: install ok installed\nVersion: 3.1\n"
    )
    installed = baseimage.installed_packages(tmp_path)
    assert installed == ["adduser 3.1", "bash 5.2"]
    assert baseimage.package_changes(["adduser 3.1", "bash 5.1"], installed) == [
        "-bash 5.1",
        "+bash 5.2",
    ]
    assert baseimage.package_changes(installed, installed) == []


def test_debootstrap_runs_in_a_mount_namespace_of_its_own_from_debians_mirror() -> None:
    argv = baseimage.debootstrap_argv(Path("/r"), Path("/c"))
    assert argv[:5] == ["unshare", "--mount", "--propagation", "private", "debootstrap"]
    assert argv[-3:] == ["bookworm", "/r", "http://deb.debian.org/debian"]
    assert "--include=" + ",".join(baseimage.PACKAGES) in argv and "runc" in baseimage.PACKAGES


def test_prepare_masks_what_would_change_the_host_and_cleans_as_kind_does(tmp_path: Path) -> None:
    for relative in (
        "usr/lib/systemd/system/multi-user.target.wants/getty.service",
        "usr/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
        "usr/share/doc/bash/copyright",
        "var/log/dpkg.log",
        "etc/systemd/journald.conf",
        "usr/sbin/keep",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x\n")
    baseimage.prepare(tmp_path)
    assert [
        str(p.relative_to(tmp_path))
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file() or p.is_symlink()
    ] == [
        "etc/hostname",
        "etc/machine-id",
        "etc/resolv.conf",
        "etc/sysctl.d/50-pid-max.conf",
        "etc/sysctl.d/99-protect-links.conf",
        "etc/systemd/journald.conf",
        "etc/systemd/system/systemd-binfmt.service",
        "usr/sbin/init",
        "usr/sbin/keep",
    ]
    assert os.readlink(tmp_path / "etc/sysctl.d/99-protect-links.conf") == "/dev/null"
    assert (tmp_path / "etc/systemd/journald.conf").read_text() == "x\nReadKMsg=no\n"
    assert os.readlink(tmp_path / "usr/sbin/init") == "/usr/lib/systemd/systemd"


def test_rootfs_members_keep_owners_and_modes_and_leave_out_devices(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/shadow").write_text("root:*:1::::::\n")
    os.chmod(tmp_path / "etc/shadow", 0o640)
    os.chown(tmp_path / "etc/shadow", 0, 42)
    (tmp_path / "etc/link").symlink_to("shadow")
    os.mkfifo(tmp_path / "etc/fifo")
    assert list(baseimage.rootfs_members(tmp_path)) == [
        Member("etc", 0o755),
        Member("etc/link", 0o777, link="shadow"),
        Member("etc/shadow", 0o640, b"root:*:1::::::\n", gid=42),
    ]


def test_an_archive_for_docker_names_the_same_blobs_in_its_manifest_json() -> None:
    layer = b"layer-bytes"
    archive, _ = image_archive(
        [layer],
        platform=Platform("linux", "amd64"),
        container_config={"Env": []},
        name="n",
        tag="t",
        docker_manifest=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    [entry] = manifest
    assert entry["RepoTags"] == ["n:t"]
    assert {entry["Config"], *entry["Layers"]} <= set(names)


def test_the_runtime_record_round_trips() -> None:
    runtime = KindRuntime(
        KindSpec("v1.36.3", pools=(NodePool("NVIDIA-L4", 1, 2),), kserve=True),
        Path("/w"),
        Path("/c/docker"),
        lock_holder=ManagedProcess("lock", 10, 10, Path("/w/l.log"), 5),
        baseline=HostBaseline(
            {"fs/file-max": "1\n"}, [], ["/etc/docker"], ["/etc/docker"], ["docker"]
        ),
        created=True,
        bridge="br-0123456789ab",
        route_via="172.18.0.3",
        images={"pause": "p@sha256:1"},
        seconds={"create": 30.0},
    )
    again = KindRuntime.from_json(json.loads(json.dumps(runtime.to_json())))
    assert again.to_json() == runtime.to_json()
    assert again.kubeconfig == Path("/w/kubeconfig") and again.context == "kind-infercrane"


def test_a_held_lock_names_what_holds_it(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    holder = hostlock.acquire(tmp_path, tmp_path / "holder.log", lock, what="a Kind cluster")
    try:
        assert hostlock.is_locked(lock) == (
            f"a Kind cluster already runs on this machine: cluster {tmp_path} "
            f"(started by pid {os.getpid()}); stop it with its `down` first"
        )
    finally:
        hostlock.release_path(lock)
        stop_process(holder)


def test_up_refuses_in_one_line_where_the_machine_cannot_run_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(hostchecks, "START_CHECKS", (lambda: "no Docker here",))
    monkeypatch.setattr(hostchecks, "PREPARE_CHECKS", (lambda: "not root",))
    assert cli.main(["up", "--dir", "/nonexistent"]) == cli.EXIT_USAGE
    assert cli.main(["prepare"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == (
        "kind: cannot up here: no Docker here\nkind: cannot prepare here: not root\n"
    )
    assert cli.main(["up", "--gpu-pool", "NVIDIA-L4=0x1"]) == cli.EXIT_USAGE


def test_down_of_a_directory_without_a_record_does_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["down", "--dir", str(tmp_path)]) == cli.EXIT_OK
    assert "nothing recorded" in capsys.readouterr().err

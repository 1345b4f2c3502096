"""The images kubeadm runs (API server, controller manager, scheduler, kube-proxy, etcd, CoreDNS,
pause), built here with the node images' builder (:mod:`infercrane_dev.images`) from the tools
bin dir, under exactly the references kubeadm asks for, so a Kind node never pulls.

Which references: ``kubeadm config images list --kubernetes-version <v>``, asked of the kubeadm
the node image carries, as kind's own node-image builder asks. Each reference is built from the
binary of the same name, whose version must be the reference's tag (``kube-*``: the Kubernetes
version; ``etcd:3.6.8-0``: etcd 3.6.8; ``coredns:v1.14.2``: CoreDNS 1.14.2); a kubeadm that asks
for a version the bin dir does not hold is refused in one line. ``pause`` is the exception: the
sandbox only holds namespaces, so our pause program serves whatever pause tag kubeadm names.

kube-proxy programs iptables, so its image carries iptables 1.8.9 from Debian 12 (pinned
``.deb`` files, :mod:`infercrane_dev.images.debs`) with the nf_tables backend as ``iptables``,
as Debian's alternatives choose and as the node itself (and Docker's rules in it) uses.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from infercrane_dev.images import BuiltImage, ImageSpec, Sources, build_image
from infercrane_dev.images.catalog import (
    PAUSE,
    ROOTFS,
    Directory,
    Executable,
    Layer,
    Packaged,
    Symlink,
    Text,
)
from infercrane_dev.images.debs import DebPin, fetch

REGISTRY = "registry.k8s.io"
# Debian 12's iptables and what its two programs load, as Debian ships them.
DEBS = (
    DebPin(
        "iptables", "1.8.9-2", "2928d3ca6ca8a3dc3f423f6752822b1f3614a5ba609ff7806bcba4449ffe90e1"
    ),
    DebPin(
        "libxtables12",
        "1.8.9-2",
        "cb841d66950a43af4a398625313d2f3da9065299c9738538de6c2c3495857040",
    ),
    DebPin(
        "libip4tc2", "1.8.9-2", "f2c48b367f9ec13f9aa577e7ccf81b371ce5d5fe22dddf9d7aa99f1e0bb7cfc4"
    ),
    DebPin(
        "libip6tc2", "1.8.9-2", "be88db3dfa2fe3345ea343207f7c75345602686121e579023d021c348b9b4f4d"
    ),
    DebPin(
        "libnftnl11", "1.2.4-2", "9e619e1470a1915264e906020f3bfc046fd8458043b1342686d997b5078213af"
    ),
    DebPin(
        "libmnl0", "1.0.4-3", "4581f42e3373cb72f9ea4e88163b17873afca614a6c6f54637e95aa75983ea7c"
    ),
    DebPin(
        "libnetfilter-conntrack3",
        "1.0.9-3",
        "65f1539238f60fcc85d115acd640474f45c77bfddcf402eb7d75965a783c2bc8",
    ),
    DebPin(
        "libnfnetlink0",
        "1.0.2-2",
        "ae5cbba417ea48f34c1f72c27e8146a81f20614c1296bca2cd7234c8215fddcc",
    ),
    DebPin(
        "libc6",
        "2.36-9+deb12u14",
        "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf",
    ),
)
_MULTIARCH_LIBS = "/usr/lib/x86_64-linux-gnu/lib*.so.*"
# Users as distroless images have them; a static binary needs no more of /etc.
USERS = Layer(
    (
        Text("etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"),
        Text("etc/group", "root:x:0:\n"),
    )
)
IPTABLES = Layer(
    (
        Directory("lib"),
        Directory("lib/x86_64-linux-gnu"),
        Directory("lib64"),
        Directory("run"),
        Directory("usr/lib"),
        Directory("usr/lib/x86_64-linux-gnu"),
        Directory("usr/lib/x86_64-linux-gnu/xtables"),
        Directory("usr/sbin"),
        Packaged(
            "iptables",
            (
                "/usr/sbin/xtables-*-multi",
                "/usr/sbin/ip*tables-nft*",
                "/usr/sbin/ip*tables-legacy*",
                "/usr/lib/x86_64-linux-gnu/xtables/*.so",
            ),
        ),
        *(
            Packaged(pin.name, (_MULTIARCH_LIBS,))
            for pin in DEBS
            if pin.name not in ("iptables", "libc6")
        ),
        Packaged(
            "libc6",
            (
                "/lib64/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib/x86_64-linux-gnu/libm.so.6",
            ),
        ),
        # Debian's alternatives: the nf_tables backend.
        *(
            Symlink(f"usr/sbin/{command}", command.replace("tables", "tables-nft", 1))
            for family in ("iptables", "ip6tables")
            for command in (family, f"{family}-save", f"{family}-restore")
        ),
    )
)


class KubeImagesError(RuntimeError):
    """kubeadm asks for an image this bin dir cannot make (one line)."""


def _binary_layer(binary: str, path: str) -> Layer:
    return Layer((Executable(path.lstrip("/"), binary),))


def image_spec(repository: str) -> ImageSpec:
    """What the image of ``registry.k8s.io/<repository>`` holds (any tag)."""
    match repository.removeprefix(f"{REGISTRY}/"):
        case "kube-apiserver" | "kube-controller-manager" | "kube-scheduler" as name:
            path = f"/usr/local/bin/{name}"
            return ImageSpec(name, (ROOTFS, USERS, _binary_layer(name, path)), (path,))
        case "kube-proxy":
            path = "/usr/local/bin/kube-proxy"
            layers = (ROOTFS, USERS, IPTABLES, _binary_layer("kube-proxy", path))
            return ImageSpec("kube-proxy", layers, (path,))
        case "etcd":
            path = "/usr/local/bin/etcd"
            return ImageSpec("etcd", (ROOTFS, USERS, _binary_layer("etcd", path)), (path,))
        case "coredns/coredns":
            return ImageSpec(
                "coredns", (ROOTFS, USERS, _binary_layer("coredns", "/coredns")), ("/coredns",)
            )
        case "pause":
            return ImageSpec("pause", (ROOTFS, PAUSE), ("/pause",))
    raise KubeImagesError(f"{repository}: no recipe for this image")


def split_reference(reference: str) -> tuple[str, str]:
    """``registry.k8s.io/etcd:3.6.8-0`` -> (``registry.k8s.io/etcd``, ``3.6.8-0``)."""
    repository, _, tag = reference.rpartition(":")
    if not repository or "/" in tag:
        raise KubeImagesError(f"{reference}: not a tagged reference")
    return repository, tag


def expected_version(repository: str, tag: str) -> str | None:
    """The version the binary must report for ``repository:tag`` (None: pause, any)."""
    name = repository.rsplit("/", 1)[1]
    if name == "pause":
        return None
    if name == "etcd":
        return tag.split("-", 1)[0]  # 3.6.8-0: etcd 3.6.8, image revision 0
    return tag.removeprefix("v") if name == "coredns" else tag


_VERSION_PATTERNS = {
    "etcd": re.compile(r"etcd Version: (\S+)"),
    "coredns": re.compile(r"CoreDNS-(\S+)"),
}
_KUBERNETES_VERSION = re.compile(r"Kubernetes (\S+)")


def binary_version(name: str, output: str) -> str | None:
    """The version in a binary's ``--version`` (``-version`` for CoreDNS) output."""
    found = _VERSION_PATTERNS.get(name, _KUBERNETES_VERSION).search(output)
    return found.group(1) if found else None


def required_references(kubeadm: Path, kubernetes_version: str) -> list[str]:
    """The images ``kubeadm`` deploys for ``kubernetes_version`` (nothing fetched)."""
    done = subprocess.run(
        [str(kubeadm), "config", "images", "list", "--kubernetes-version", kubernetes_version],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        raise KubeImagesError(f"kubeadm config images list: {done.stderr.strip()}")
    return done.stdout.split()


def _check_binary(bin_dir: Path, repository: str, tag: str) -> None:
    want = expected_version(repository, tag)
    if want is None:
        return
    spec = image_spec(repository)
    [binary] = [
        e.binary for layer in spec.layers for e in layer.entries if isinstance(e, Executable)
    ]
    flag = "-version" if binary == "coredns" else "--version"
    done = subprocess.run(
        [str(bin_dir / binary), flag], capture_output=True, text=True, check=False, timeout=30
    )
    have = binary_version(binary, done.stdout + done.stderr)
    if have != want:
        raise KubeImagesError(
            f"kubeadm wants {repository}:{tag}, but {bin_dir / binary} is version {have}"
        )


def build_kubernetes_images(
    bin_dir: Path, references: Sequence[str], *, out_dir: Path, deb_cache: Path
) -> list[BuiltImage]:
    """``<out_dir>/<name>.oci.tar`` for each reference kubeadm asks for."""
    sources = Sources(bin_dir, fetch(DEBS, deb_cache))
    built = []
    for reference in references:
        repository, tag = split_reference(reference)
        _check_binary(bin_dir, repository, tag)
        built.append(
            build_image(image_spec(repository), sources, name=repository, tag=tag, out_dir=out_dir)
        )
    return built

"""The node image's base: Debian 12 (bookworm) with systemd, made by debootstrap, as an archive
Docker loads (``infercrane.local/kind-base:<key>``).

Why not kind's own base image: it is Debian 13, whose systemd (>= 256) refuses cgroup v1, which
this kind of machine has; and it is pulled from a registry. So the rootfs comes from Debian's
packages (kind's package list, minus what only rootless, NFS and iSCSI tests need, plus Debian's
runc), and gets what kind's base Dockerfile does to it: no units started that a container must
not start, journald not reading the kernel's log, ``/sbin/init``. Two more masks keep a
privileged node from changing the host: ``99-protect-links.conf`` and ``50-pid-max.conf`` would
set host-wide ``fs.protected_*`` and ``kernel.pid_max`` (systemd-sysctl runs in every node).

debootstrap runs in a mount namespace of its own (``unshare --mount``): the ``/proc`` and
``/sys`` it mounts in the rootfs are never seen by the host, and vanish with it if it dies.
Debian's mirror serves the suite's current packages, so the set that was installed is compared
with the committed ``base-packages.txt`` (name and version of each): a point release of
bookworm fails the build in one line until the list is recorded again (``--record``), as a
pinned host package would. The archive is cached under its key (the recipe: suite, mirror,
package list, debootstrap's version, this module's source), so it is made once per machine.
Its layer is not byte-reproducible: maintainer scripts write dates (``/etc/shadow``, logs).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infercrane_dev.images.build import host_platform
from infercrane_dev.images.ocilayout import Member, image_archive, tar_bytes

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# kind v0.33.0's images/base/Dockerfile list, without fuse-overlayfs (rootless only), nfs-common
# and open-iscsi (storage e2e tests), with Debian's runc (kind builds its own).
PACKAGES = (
    "systemd",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "curl",
    "jq",
    "procps",
    "runc",
)
REPOSITORY = "infercrane.local/kind-base"
PACKAGES_FILE = Path(__file__).with_name("base-packages.txt")
# What kind's clean-install removes after installing packages (docs, caches, logs, lists).
_CLEANED = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "var/cache/debconf",
    "var/log",
    "tmp",
    "var/tmp",
    "usr/share/doc",
    "usr/share/doc-base",
    "usr/share/man",
    "usr/share/locale",
)
# Unit links kind's Dockerfile removes: a container must not run udev, tmpfiles' setup, gettys.
_UNWANTED_UNITS = (
    "usr/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
    "usr/lib/systemd/system/multi-user.target.wants/*",
    "etc/systemd/system/*.wants/*",
    "usr/lib/systemd/system/local-fs.target.wants/*",
    "usr/lib/systemd/system/sockets.target.wants/*udev*",
    "usr/lib/systemd/system/sockets.target.wants/*initctl*",
    "usr/lib/systemd/system/basic.target.wants/*",
)
# Masked (linked to /dev/null): host-wide effects from inside a privileged node.
MASKED = (
    "etc/systemd/system/systemd-binfmt.service",  # binfmt_misc is kernel-global
    "etc/sysctl.d/99-protect-links.conf",  # fs.protected_* are host-wide
    "etc/sysctl.d/50-pid-max.conf",  # kernel.pid_max
)


class BaseImageError(RuntimeError):
    """The base could not be made (one line)."""


@dataclass(frozen=True)
class BaseImage:
    archive: Path
    reference: str  # infercrane.local/kind-base:<key>
    image_id: str  # the config's digest: what Docker names the loaded image by


def cache_root() -> Path:
    explicit = os.environ.get("INFERCRANE_KIND_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "infercrane" / "kind"


def _debootstrap_version() -> str:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "debootstrap"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BaseImageError("debootstrap is not installed; run hack/host-packages.sh as root")
    return done.stdout.strip()


def base_key(debootstrap_version: str) -> str:
    recipe = "\n".join(
        [
            SUITE,
            MIRROR,
            *PACKAGES,
            f"debootstrap {debootstrap_version}",
            Path(__file__).read_text(encoding="utf-8"),
        ]
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def debootstrap_argv(target: Path, cache: Path) -> list[str]:
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "debootstrap",
        "--variant=minbase",
        "--merged-usr",
        f"--include={','.join(PACKAGES)}",
        f"--cache-dir={cache}",
        SUITE,
        str(target),
        MIRROR,
    ]


def installed_packages(rootfs: Path) -> list[str]:
    """``name version`` of every installed package, sorted, from the rootfs's dpkg status."""
    found = []
    text = (rootfs / "var/lib/dpkg/status").read_text(encoding="utf-8")
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if fields.get("Status") == "install ok installed":
            found.append(f"{fields['Package']} {fields['Version']}")
    return sorted(found)


def package_changes(recorded: list[str], installed: list[str]) -> list[str]:
    """What differs between the committed list and the installed one (``-``/``+`` lines)."""
    return [f"-{p}" for p in recorded if p not in installed] + [
        f"+{p}" for p in installed if p not in recorded
    ]


def prepare(rootfs: Path) -> None:
    """kind's base Dockerfile's clean-up and systemd set-up, and the host-protecting masks."""
    for relative in _CLEANED:
        directory = rootfs / relative
        if directory.is_dir():
            for child in directory.iterdir():
                _remove(child)
    for pattern in _UNWANTED_UNITS:
        for unit in rootfs.glob(pattern):
            unit.unlink()
    journald = rootfs / "etc/systemd/journald.conf"
    journald.write_text(journald.read_text(encoding="utf-8") + "ReadKMsg=no\n", encoding="utf-8")
    init = rootfs / "usr/sbin/init"
    if not init.is_symlink():
        init.symlink_to("/usr/lib/systemd/systemd")
    for relative in MASKED:
        (rootfs / relative).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / relative).symlink_to("/dev/null")
    # A node gets its identity and resolver from its container.
    (rootfs / "etc/machine-id").write_text("", encoding="utf-8")
    (rootfs / "etc/resolv.conf").write_text("", encoding="utf-8")
    (rootfs / "etc/hostname").write_text("localhost\n", encoding="utf-8")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def rootfs_members(rootfs: Path) -> Iterator[Member]:
    """The rootfs as image members with their owners and modes; hard links become copies,
    and device nodes, FIFOs and sockets are left out (the container runtime makes /dev)."""
    for directory, dirnames, filenames in os.walk(rootfs):
        dirnames.sort()
        base = Path(directory)
        for name in sorted([*dirnames, *filenames]):
            path = base / name
            info = path.lstat()
            relative = str(path.relative_to(rootfs))
            mode = stat.S_IMODE(info.st_mode)
            uid, gid = info.st_uid, info.st_gid
            if stat.S_ISLNK(info.st_mode):
                yield Member(relative, 0o777, link=os.readlink(path), uid=uid, gid=gid)
            elif stat.S_ISDIR(info.st_mode):
                yield Member(relative, mode, uid=uid, gid=gid)
            elif stat.S_ISREG(info.st_mode):
                yield Member(relative, mode, path.read_bytes(), uid=uid, gid=gid)


def _archive(rootfs: Path, key: str, path: Path) -> BaseImage:
    layer = tar_bytes(rootfs_members(rootfs))
    data, _ = image_archive(
        [layer],
        platform=host_platform(),
        container_config={
            # systemd reads it to know it runs in a container; SIGRTMIN+3 is its "halt".
            "Env": ["container=docker"],
            "StopSignal": "SIGRTMIN+3",
        },
        name=REPOSITORY,
        tag=key,
        docker_manifest=True,
    )
    staged = path.with_name(f".{path.name}.partial")
    staged.write_bytes(data)
    os.replace(staged, path)
    return loaded_base(path, key)


def loaded_base(archive: Path, key: str) -> BaseImage:
    """The base image an archive holds (its Docker image id read from its manifest.json)."""
    with tarfile.open(archive) as tar:
        manifest = tar.extractfile("manifest.json")
        assert manifest is not None
        [entry] = json.loads(manifest.read())
    image_id = "sha256:" + entry["Config"].rsplit("/", 1)[1]
    return BaseImage(archive=archive, reference=f"{REPOSITORY}:{key}", image_id=image_id)


def ensure_base(cache: Path, *, record: bool = False, log: Path | None = None) -> BaseImage:
    """The base's archive under ``cache``, made now when absent (about 2 minutes)."""
    key = base_key(_debootstrap_version())
    archive = cache / f"kind-base-{key}.oci.tar"
    if archive.is_file():
        return loaded_base(archive, key)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        debs = cache / "debootstrap-debs"  # kept: a new key downloads only what changed
        debs.mkdir(exist_ok=True)
        with (log or Path(os.devnull)).open("a") as out:
            done = subprocess.run(
                debootstrap_argv(rootfs, debs),
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != 0:
            raise BaseImageError(f"debootstrap {SUITE} failed (exit {done.returncode}; log {log})")
        installed = installed_packages(rootfs)
        if record:
            PACKAGES_FILE.write_text("\n".join(installed) + "\n", encoding="utf-8")
        recorded = PACKAGES_FILE.read_text(encoding="utf-8").splitlines()
        changes = package_changes(recorded, installed)
        if changes:
            raise BaseImageError(
                f"Debian's {SUITE} installed other packages than {PACKAGES_FILE.name} records "
                f"({' '.join(changes[:6])}{' ...' if len(changes) > 6 else ''}); review, then "
                "`python -m infercrane_dev.kind build --record-base-packages`"
            )
        prepare(rootfs)
        return _archive(rootfs, key, archive)

"""The runner image: the provider as a control plane runs it inside the cluster.

It holds Debian 12's Python 3.11 (pinned ``.deb`` files, :mod:`.debs`: the interpreter, its
standard library, and the system libraries it and the wheels link), this checkout's wheel with
its runtime set as the hash lock names it (:mod:`.wheel_lock`: ``pip install --require-hashes
--target`` of binary wheels for CPython 3.11 on manylinux, whatever the host's Python), and
the Pulumi CLI, the Python language host and the pulumi-kubernetes plugin from the tools bin
dir. No shell, no package manager.

- It runs as ``65532:65532`` (``runner``) and writes nothing in its own files: a Pod gives it a
  writable ``/tmp`` (the runs' workspaces, Python's bytecode cache at ``PYTHONPYCACHEPREFIX``)
  and a writable ``PULUMI_HOME``, where Pulumi keeps logs, stack selections and the plugin's
  last-used marks. The plugin itself ships at :data:`PLUGIN_FILE`; ``pulumi plugin install
  --file`` puts it into that home (the manifests' init container).
- The entrypoint is the JSON CLI under ``tini`` (Debian's), PID 1: an engine's process that
  outlives its parent (a plugin of a CLI killed by a signal, which the run then stops) is
  reaped, never left a zombie for as long as the Pod lives. A control plane that drives
  ``NamespaceStack`` uses the image as its base.
- The build is byte-reproducible (:mod:`.ocilayout`; the wheels are the pinned ones, with no
  path of the build machine left in them), so one checkout makes one digest, which the
  manifests reference. A change to the product makes a new wheel, so a new digest.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

from infercrane_pulumi.program.components import PLUGIN_VERSION

from . import debian
from .build import BuiltImage, Sources, build_image
from .catalog import (
    ACCOUNT_ID,
    ROOTFS,
    Directory,
    Executable,
    ImageSpec,
    Layer,
    Packaged,
    Symlink,
    Tree,
    account,
)
from .debs import fetch
from .wheel_lock import PIP, PYTHON_ABI, WHEEL_PLATFORMS, build_wheel, lock_path, run, sha256

REPOSITORY = "infercrane.local/infercrane/runner"
USER = f"{ACCOUNT_ID}:{ACCOUNT_ID}"
PULUMI_HOME = "/home/runner/.pulumi"
PLUGIN_FILE = f"/usr/local/lib/infercrane/pulumi-resource-kubernetes-v{PLUGIN_VERSION}"
_SITE = "usr/lib/python3/dist-packages"  # where Debian's python3.11 looks for packages

# Debian 12's python3.11 and the libraries its extension modules and the wheels link against
# (readelf NEEDED, mapped by dpkg -S); readline, curses, dbm, sqlite and NIS are left out, so
# those modules fail on import, and nothing the provider runs imports them.
_LIBRARIES = (
    "libstdc++6",
    "libgcc-s1",
    "zlib1g",
    "libssl3",
    "libuuid1",
    "liblzma5",
    "libffi8",
    "libexpat1",
    "libbz2-1.0",
    "libcrypt1",
)
_PYTHON = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib")
DEBS = debian.pins(("libc6", *_LIBRARIES, *_PYTHON, "tini"))

PYTHON = Layer(
    (
        *debian.libraries(_LIBRARIES),
        Directory("usr/lib/python3"),
        Packaged("python3.11-minimal", ("/usr/bin/python3.11",)),
        Packaged("libpython3.11-minimal", ("/usr/lib/python3.11*", "/etc/python3.11*")),
        Packaged("libpython3.11-stdlib", ("/usr/lib/python3.11/*",)),
        Symlink("usr/bin/python3", "python3.11"),
        Packaged("tini", ("/usr/bin/tini",)),
    )
)
USERS = account("runner", "home/runner")
SITE = Layer((Tree(_SITE, "site-packages"),))
PULUMI = Layer(
    (
        Directory("usr/local/lib"),
        Directory("usr/local/lib/infercrane"),
        Executable("usr/local/bin/pulumi", "pulumi"),
        Executable("usr/local/bin/pulumi-language-python", "pulumi-language-python"),
        Executable("usr/local/bin/pulumi-language-python-exec", "pulumi-language-python-exec"),
        Executable(PLUGIN_FILE.lstrip("/"), "pulumi-resource-kubernetes"),
    )
)
SPEC = ImageSpec(
    "runner",
    (ROOTFS, USERS, PYTHON, SITE, PULUMI),
    ("/usr/bin/tini", "--", "/usr/bin/python3", "-m", "infercrane_pulumi"),
    env=(
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "HOME=/home/runner",
        f"PULUMI_HOME={PULUMI_HOME}",
        "INFERCRANE_TOOLS_BIN=/usr/local/bin",
        "PULUMI_SKIP_UPDATE_CHECK=true",
        # The root file system is read-only: bytecode goes to the Pod's /tmp, once per Pod.
        "PYTHONPYCACHEPREFIX=/tmp/pycache",
    ),
    user=USER,
)


def site_packages(checkout: Path, target: Path) -> None:
    """``target`` holds this checkout's wheel and its dependencies as the checkout's lock
    (:mod:`.wheel_lock`) names them, every wheel checked against its hash, without scripts or
    bytecode (so that it is the same bytes whichever host built it)."""
    with tempfile.TemporaryDirectory(prefix="infercrane-runner-wheel-") as work:
        wheel = build_wheel(checkout, Path(work))
        requirements = Path(work) / "requirements.txt"
        requirements.write_text(
            lock_path(checkout).read_text(encoding="utf-8")
            + f"{wheel} --hash=sha256:{sha256(wheel)}\n",
            encoding="utf-8",
        )
        run(
            [
                *PIP,
                "install",
                "--no-compile",
                "--require-hashes",
                "--only-binary=:all:",
                *PYTHON_ABI,
                *WHEEL_PLATFORMS,
                "--target",
                str(target),
                "-r",
                str(requirements),
            ],
            "pip install --target",
        )
    shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts name the host's Python
    for direct_url in target.glob("*.dist-info/direct_url.json"):
        # The temporary wheel's path: gone, with its line in the RECORD.
        direct_url.unlink()
        record = direct_url.with_name("RECORD")
        lines = record.read_text(encoding="utf-8").splitlines(keepends=True)
        name = f"{direct_url.parent.name}/{direct_url.name},"
        record.write_text("".join(x for x in lines if not x.startswith(name)), encoding="utf-8")


def build_runner(bin_dir: Path, checkout: Path, *, out_dir: Path, deb_cache: Path) -> BuiltImage:
    """``<out_dir>/runner.oci.tar``, tagged with the wheel's version."""
    with tempfile.TemporaryDirectory(prefix="infercrane-runner-site-") as site:
        site_packages(checkout, Path(site))
        sources = Sources(bin_dir, fetch(DEBS, deb_cache), {"site-packages": Path(site)})
        return build_image(
            SPEC,
            sources,
            name=REPOSITORY,
            tag=version("infercrane-pulumi"),
            out_dir=out_dir,
            docker_manifest=True,
        )

"""The runner image: the provider as a control plane runs it inside the cluster.

It holds Debian 12's Python 3.11 (pinned ``.deb`` files, :mod:`.debs`: the interpreter, its
standard library, and the system libraries it and the wheels link), this checkout's wheel with
the exact pins of ``constraints.txt`` (``pip install --target`` of binary wheels for CPython 3.11
on manylinux, whatever the host's Python), and the Pulumi CLI, the Python language host and the
pulumi-kubernetes plugin from the tools bin dir. No shell, no package manager.

- It runs as ``65532:65532`` (``runner``) and writes nothing in its own files: a Pod gives it a
  writable ``/tmp`` (the runs' workspaces, Python's bytecode cache at ``PYTHONPYCACHEPREFIX``)
  and a writable ``PULUMI_HOME``, where Pulumi keeps logs, stack selections and the plugin's
  last-used marks. The plugin itself ships at :data:`PLUGIN_FILE`; ``pulumi plugin install
  --file`` puts it into that home (the manifests' init container).
- The entrypoint is the JSON CLI; a control plane that drives ``NamespaceStack`` uses the image
  as its base (``deploy/kubernetes/runner/README.md``).
- The build is byte-reproducible (:mod:`.ocilayout`; the wheels are the pinned ones, with no
  path of the build machine left in them), so one checkout makes one digest, which the
  manifests reference. A change to the product makes a new wheel, so a new digest.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from infercrane_pulumi.components import PLUGIN_VERSION

from .build import BuiltImage, ImageBuildError, Sources, build_image
from .catalog import ROOTFS, Directory, Executable, ImageSpec, Layer, Packaged, Symlink, Text, Tree
from .debs import DebPin, fetch

REPOSITORY = "infercrane.local/infercrane/runner"
USER = "65532:65532"
PULUMI_HOME = "/home/runner/.pulumi"
PLUGIN_FILE = f"/usr/local/lib/infercrane/pulumi-resource-kubernetes-v{PLUGIN_VERSION}"
_SITE = "usr/lib/python3/dist-packages"  # where Debian's python3.11 looks for packages
_PYTHON_ABI = ("--implementation", "cp", "--python-version", "3.11", "--abi", "cp311")
_WHEEL_PLATFORMS = tuple(
    f"--platform=manylinux{tag}_x86_64" for tag in ("_2_36", "_2_28", "_2_17", "2014")
)

# Debian 12's python3.11 and the libraries its extension modules and the wheels' link against
# (readelf NEEDED, mapped by dpkg -S); readline, curses, dbm, sqlite and NIS are left out, so
# those modules fail on import, and nothing the provider runs imports them.
DEBS = (
    DebPin(
        "python3.11-minimal",
        "3.11.2-6+deb12u9",
        "b5f855ab922dfcd5d1a3223b2118c3dae13ffc7751b0cd5dc24740386323a33a",
    ),
    DebPin(
        "libpython3.11-minimal",
        "3.11.2-6+deb12u9",
        "69f41cfa3f4ba17284e538f843069d7529c53c207d2ae17a5b02785944870e33",
    ),
    DebPin(
        "libpython3.11-stdlib",
        "3.11.2-6+deb12u9",
        "10f13e000ee757f5f2d2d3569f9e30546214a0c850acd78695feae373bfa3e53",
    ),
    DebPin(
        "libc6",
        "2.36-9+deb12u14",
        "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf",
    ),
    DebPin(
        "libstdc++6",
        "12.2.0-14+deb12u1",
        "5cd3171216d4ab0fc911cfe9c35509bf2dd8f47761c43b7f6a4296701551a24d",
    ),
    DebPin(
        "libgcc-s1",
        "12.2.0-14+deb12u1",
        "3016e62cb4b7cd8038822870601f5ed131befe942774d0f745622cc77d8a88f7",
    ),
    DebPin(
        "zlib1g",
        "1:1.2.13.dfsg-1",
        "d7dd1d1411fedf27f5e27650a6eff20ef294077b568f4c8c5e51466dc7c08ce4",
    ),
    DebPin(
        "libssl3",
        "3.0.22-1~deb12u2",
        "cb4784740daa9b3b0eaea2b444bbefa686794afbbf3d678d238c1fd9875f2efd",
    ),
    DebPin(
        "libuuid1",
        "2.38.1-5+deb12u3",
        "5fff398321da62d28a842bcbabd193d72ae21724962c029dc32b1dc6b2deaeaf",
    ),
    DebPin(
        "liblzma5",
        "5.4.1-1+deb12u2",
        "3d8c29c8c21ec6007635e1b2591edf98b771c9572a085968f47452b33040f384",
    ),
    DebPin(
        "libffi8", "3.4.4-1", "6d9f6c25c30efccce6d4bceaa48ea86c329a3432abb360a141f76ac223a4c34a"
    ),
    DebPin(
        "libexpat1",
        "2.5.0-1+deb12u5",
        "cae5ded666d8573dd33060bc66fbac21eea8b101a6b56e2af8bd590fcfa65d79",
    ),
    DebPin(
        "libbz2-1.0",
        "1.0.8-5+b1",
        "54149da3f44b22d523b26b692033b84503d822cc5122fed606ea69cc83ca5aeb",
    ),
    DebPin(
        "libcrypt1",
        "1:4.4.33-2",
        "f5f60a5cdfd4e4eaa9438ade5078a57741a7a78d659fcb0c701204f523e8bd29",
    ),
)
_LIB, _USR_LIB = "/lib/x86_64-linux-gnu/*", "/usr/lib/x86_64-linux-gnu/*"
# Where each library package puts its files (all of them: OpenSSL's engine and provider
# directories too).
_LIBRARIES = {
    "libstdc++6": (_USR_LIB,),
    "libgcc-s1": (_LIB,),
    "zlib1g": (_LIB,),
    "libssl3": (_USR_LIB,),
    "libuuid1": (_USR_LIB,),
    "liblzma5": (_LIB,),
    "libffi8": (_USR_LIB,),
    "libexpat1": (_LIB, _USR_LIB),
    "libbz2-1.0": (_LIB,),
    "libcrypt1": (_LIB,),
}

PYTHON = Layer(
    (
        Directory("lib"),
        Directory("lib/x86_64-linux-gnu"),
        Directory("lib64"),
        Directory("usr/lib"),
        Directory("usr/lib/python3"),
        Directory("usr/lib/x86_64-linux-gnu"),
        Packaged(
            "libc6",
            (
                "/lib64/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/lib*.so.*",
                "/etc/ld.so.conf*",
            ),
        ),
        *(Packaged(name, patterns) for name, patterns in _LIBRARIES.items()),
        Packaged("python3.11-minimal", ("/usr/bin/python3.11",)),
        Packaged("libpython3.11-minimal", ("/usr/lib/python3.11*", "/etc/python3.11*")),
        Packaged("libpython3.11-stdlib", ("/usr/lib/python3.11/*",)),
        Symlink("usr/bin/python3", "python3.11"),
    )
)
USERS = Layer(
    (
        Text(
            "etc/passwd",
            "root:x:0:0:root:/root:/sbin/nologin\nrunner:x:65532:65532::/home/runner:/sbin/nologin\n",
        ),
        Text("etc/group", "root:x:0:\nrunner:x:65532:\n"),
        Directory("home"),
        Directory("home/runner"),
    )
)
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
    ("/usr/bin/python3", "-m", "infercrane_pulumi"),
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
    """``target`` holds this checkout's wheel and its dependencies at the exact pins, as binary
    wheels for CPython 3.11 on x86_64 Linux, without scripts or bytecode (so that it is the same
    bytes whichever host built it)."""
    with tempfile.TemporaryDirectory(prefix="infercrane-runner-wheel-") as wheels:
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
        _run([*pip, "wheel", "--no-deps", "--wheel-dir", wheels, str(checkout)], "pip wheel")
        [wheel] = Path(wheels).glob("*.whl")
        _run(
            [
                *pip,
                "install",
                "--no-compile",
                "--only-binary=:all:",
                *_PYTHON_ABI,
                *_WHEEL_PLATFORMS,
                "--target",
                str(target),
                "-c",
                str(checkout / "constraints.txt"),
                str(wheel),
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


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ImageBuildError(f"runner image: {what} failed: {last}")


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

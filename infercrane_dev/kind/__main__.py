"""Command line: ``python -m infercrane_dev.kind prepare|up|down``.

``prepare`` makes what a cluster is made of (the Debian base, the Kubernetes and stand-in
images, the node image's plan) without Docker or the machine lock; ``up`` starts a Kind cluster
*detached* (dockerd and the lock's holder outlive this command), records it in DIR and prints
its kubeconfig and admin context, the timings of its steps and the stand-in images' references;
``down`` tears down what DIR records and puts the host back. ``up`` refuses in one line, exit 2,
before starting anything, where this machine cannot run it (not root, no Docker, the machine's
real-node lock held...). Exit codes: 0 ok, 1 failure, 2 bad usage or an unfit machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from infercrane_dev.localcluster.nodepools import NodePoolError, parse_node_pool
from infercrane_dev.localcluster.processes import release
from infercrane_dev.toolchain import BinaryNotFoundError, find_binary

from .baseimage import BaseImageError, cache_root
from .cluster import KindError, KindRuntime, KindUnavailable, Prepared, prepare
from .clusterconfig import DEFAULT_NAME, DEFAULT_POOLS, KindSpec
from .hostchecks import unavailable
from .kserve import KServeInstallError
from .kubeimages import KubeImagesError
from .nodeimage import NodeImageError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_DIR = Path(".infercrane") / "kind"
KUBERNETES_VERSION = "v1.36.3"
FAILURES = (KindError, BaseImageError, KubeImagesError, NodeImageError, KServeInstallError, OSError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infercrane_dev.kind",
        description="Start or stop a disposable Kind cluster on a node image built here.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("prepare", "build the base, the images and the node image's inputs (no Docker)"),
        ("up", "start the cluster in the background"),
        ("down", "delete the cluster and put the host back"),
    ):
        command = commands.add_parser(name, help=text)
        if name != "down":
            command.add_argument("--kubernetes-version", default=KUBERNETES_VERSION)
            command.add_argument(
                "--kserve",
                action="store_true",
                help="also KServe's controller (hack/tools/build.sh --only kserve), on a worker "
                "of its own",
            )
        if name != "prepare":
            command.add_argument(
                "--dir", type=Path, default=DEFAULT_DIR, help=f"default: <cwd>/{DEFAULT_DIR}"
            )
    commands.choices["prepare"].add_argument(
        "--record-base-packages",
        action="store_true",
        help="rewrite base-packages.txt from a fresh debootstrap (after a Debian point release)",
    )
    up = commands.choices["up"]
    up.add_argument("--name", default=DEFAULT_NAME)
    up.add_argument(
        "--gpu-pool",
        action="append",
        metavar="PRODUCT=NODESxGPUS",
        help=f"GPU workers (repeatable; default {DEFAULT_POOLS[0].spec})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "down":
        return _down(args.dir.resolve())
    try:
        pools = (
            tuple(parse_node_pool(p) for p in args.gpu_pool or ()) if args.command == "up" else ()
        )
        spec = KindSpec(
            args.kubernetes_version,
            getattr(args, "name", DEFAULT_NAME),
            pools or DEFAULT_POOLS,
            kserve=args.kserve,
        )
    except NodePoolError as bad:
        print(f"kind: {bad}", file=sys.stderr)
        return EXIT_USAGE
    problem = unavailable(starting=args.command == "up", kserve=spec.kserve)
    if problem is not None:
        print(f"kind: cannot {args.command} here: {problem}", file=sys.stderr)
        return EXIT_USAGE
    return _prepare_and_start(args, spec)


def _prepare_and_start(args: argparse.Namespace, spec: KindSpec) -> int:
    try:
        bin_dir = find_binary("kind").parent
        started = time.monotonic()
        record = getattr(args, "record_base_packages", False)
        prepared = prepare(spec, bin_dir, cache=cache_root(), log=_log(args), record_base=record)
        print(f"kind: prepared in {time.monotonic() - started:.1f}s", file=sys.stderr)
        if args.command == "prepare":
            return EXIT_OK
        return _up(spec, args.dir.resolve(), prepared=prepared, bin_dir=bin_dir)
    except BinaryNotFoundError as missing:
        print(f"kind: {missing}", file=sys.stderr)
        return EXIT_USAGE
    except FAILURES as failed:
        print(f"kind: {failed}", file=sys.stderr)
        return EXIT_FAILED


def _log(args: argparse.Namespace) -> Path:
    directory: Path = getattr(args, "dir", None) or cache_root()
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "debootstrap.log"


def _up(spec: KindSpec, workdir: Path, *, prepared: Prepared, bin_dir: Path) -> int:
    recorded = KindRuntime.load(workdir)
    if recorded is not None and recorded.lock_holder is not None:
        print(
            f"kind: {workdir} records a running cluster; `down --dir {workdir}` first",
            file=sys.stderr,
        )
        return EXIT_USAGE
    runtime = KindRuntime(spec, workdir, cache_root() / "docker")
    try:
        runtime.start(prepared, bin_dir)
    except KindUnavailable as refused:
        print(f"kind: cannot start here: {refused}", file=sys.stderr)
        return EXIT_USAGE
    # Detached: dockerd and the lock's holder outlive this process; `down` stops them.
    for process in (runtime.dockerd, runtime.lock_holder):
        if process is not None:
            release(process)
    print(f"kubeconfig: {runtime.kubeconfig}")
    print(f"context: {runtime.context}")
    for step, seconds in runtime.seconds.items():
        print(f"{step}: {seconds}s")
    for name, reference in runtime.images.items():
        print(f"image {name}: {reference}")
    return EXIT_OK


def _down(workdir: Path) -> int:
    runtime = KindRuntime.load(workdir)
    if runtime is None:
        print(f"kind: nothing recorded in {workdir}", file=sys.stderr)
        return EXIT_OK
    errors = runtime.teardown()
    for error in errors:
        print(f"kind: {error}", file=sys.stderr)
    return EXIT_FAILED if errors else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

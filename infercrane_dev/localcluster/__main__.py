"""Command line: ``python -m infercrane_dev.localcluster up|down|nodes|add-pool|delete-node``.

``up`` starts the local control plane *detached* (the daemons outlive this
command) and records how to stop it in DIR; ``down`` stops whatever DIR
records and removes DIR.  ``up --node-pool NVIDIA-L40S=2x1`` (repeatable) adds
simulated GPU nodes and implies ``--scheduling``; ``up --real-node NVIDIA-L4=1x2``
makes this machine a node whose Pods run (:mod:`.realnode`), and refuses in one line,
exit 2, before starting anything, where it cannot run.  The node subcommands are in
:mod:`.nodecommands`.  Exit codes: 0 ok, 1 failure, 2 bad usage or a machine that
cannot run the real node.
This entry point must not start a second cluster over a live one, and must
never stop processes that DIR does not record.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from infercrane_dev.toolchain import BinaryNotFoundError

from . import nodecommands
from .containerd import ImageImportError
from .controlplane import ControlPlaneError, LocalControlPlane
from .hostchecks import RealNodeUnavailable, unavailable
from .hostnet import POD_SUBNET
from .nodepools import (
    DEFAULT_PRODUCT_LABEL,
    NodePool,
    NodePoolError,
    parse_node_pools,
    validate_label_name,
)
from .processes import ProcessStartError
from .realnode import RealNodeError
from .realnodes import RealNodeSpec, RealNodeSpecError, parse_real_node
from .state import StateError, load_state, save_state, stop_recorded, teardown

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
NODE_COMMANDS = ("nodes", "add-pool", "delete-node")

DEFAULT_STATE_DIR = Path(".infercrane") / "localcluster"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infercrane_dev.localcluster",
        description="Start or stop a disposable local Kubernetes control plane.",
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{up,down,nodes,add-pool,delete-node}"
    )
    dir_help = f"state directory (default: <cwd>/{DEFAULT_STATE_DIR})"
    up = commands.add_parser("up", help="start the control plane in the background")
    up.add_argument("--dir", type=Path, help=dir_help)
    up.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        help="seconds each component may take to become ready (default: 180)",
    )
    up.add_argument(
        "--scheduling",
        action="store_true",
        help="also run kube-scheduler and kwok (implied by --node-pool)",
    )
    nodecommands.add_pool_argument(up, required=False)
    up.add_argument(
        "--real-node",
        metavar="PRODUCT=1xGPUS",
        help="make this machine a node with GPUS fake GPUs of PRODUCT whose Pods really run "
        "(root; implies --scheduling), e.g. NVIDIA-L4=1x2",
    )
    up.add_argument(
        "--gpu-product-label",
        default=DEFAULT_PRODUCT_LABEL,
        help=f"Node label holding the GPU product (default: {DEFAULT_PRODUCT_LABEL})",
    )
    up.add_argument(
        "--kserve",
        action="store_true",
        help="install KServe v0.20.0 (CRDs, Standard mode, webhooks) and run its controller",
    )
    down = commands.add_parser("down", help="stop the control plane recorded in --dir")
    down.add_argument("--dir", type=Path, help=dir_help)
    nodecommands.register(commands, dir_help)
    return parser


def _err(message: str) -> None:
    print(f"localcluster: {message}", file=sys.stderr)


def _up(
    state_dir: Path,
    timeout: float,
    *,
    scheduling: bool,
    pools: tuple[NodePool, ...],
    product_label: str,
    real_node: RealNodeSpec | None,
    kserve: bool,
) -> int:
    try:
        existing = load_state(state_dir)
    except StateError as exc:
        _err(f"{exc}; remove {state_dir} or run `down` first")
        return EXIT_FAILED
    if existing is not None:
        if existing.any_running():
            _err(f"already up (kubeconfig {existing.kubeconfig_path}); run `down` first")
            return EXIT_FAILED
        # Leftovers of a cluster that died on its own: clear them before reusing DIR.
        _, errors = stop_recorded(state_dir)
        if errors:
            _err(f"could not clear the previous cluster in {state_dir}: {'; '.join(errors)}")
            return EXIT_FAILED

    created_dir = not state_dir.exists()
    plane = LocalControlPlane(
        base_dir=state_dir,
        startup_timeout=timeout,
        scheduling=scheduling,
        node_pools=pools,
        gpu_product_label=product_label,
        real_node=real_node,
        kserve=kserve,
    )
    try:
        plane.start()
    except (
        BinaryNotFoundError,
        ControlPlaneError,
        ProcessStartError,
        RealNodeUnavailable,
        RealNodeError,
        ImageImportError,
        OSError,
    ) as exc:
        # OSError covers the kubernetes client's connection errors while adding pools.
        if created_dir:
            shutil.rmtree(state_dir, ignore_errors=True)
        _err(f"start failed: {exc}")
        return EXIT_USAGE if isinstance(exc, RealNodeUnavailable) else EXIT_FAILED

    state = plane.detach()
    try:
        save_state(state_dir, state)
    except OSError as exc:
        # Without a record nobody could stop the daemons later, so stop them now.
        teardown(state.processes, state.workdir, grace=15.0)
        _err(f"could not record state in {state_dir}: {exc}")
        return EXIT_FAILED

    print(f"kubeconfig: {state.kubeconfig_path}")
    print(f"server: {state.server}")
    print(f"admin context: {state.admin_context}")
    print(f"provider context: {state.provider_context}")
    print(f"scheduling: {'kube-scheduler + kwok' if state.scheduling else 'off'}")
    for pool in pools:
        print(f"node pool: {pool.spec} ({state.gpu_product_label}={pool.product})")
    if real_node is not None:
        print(
            f"real node: {plane.real_node} {real_node.spec} "
            f"({state.gpu_product_label}={real_node.product}, pods on {POD_SUBNET})"
        )
        for name, reference in plane.node_images.items():
            print(f"node image: {name} {reference}")
    if kserve:
        print("kserve: controller v0.20.0 running (Standard mode, no Ingress)")
    print(f"cold start: {state.cold_start_seconds:.1f}s")
    print(f"stop with: python -m infercrane_dev.localcluster down --dir {state_dir}")
    return EXIT_OK


def _down(state_dir: Path) -> int:
    try:
        found, errors = stop_recorded(state_dir)
    except StateError as exc:
        _err(str(exc))
        return EXIT_FAILED
    if errors:
        for error in errors:
            _err(error)
        return EXIT_FAILED
    print(
        f"stopped local control plane in {state_dir}"
        if found
        else f"nothing recorded in {state_dir}"
    )
    return EXIT_OK


def _real_node(args: argparse.Namespace) -> RealNodeSpec | None:
    return None if args.real_node is None else parse_real_node(args.real_node)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        # argparse exits 2 on bad usage and 0 for --help; report instead of exiting.
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    state_dir: Path = (args.dir or Path.cwd() / DEFAULT_STATE_DIR).absolute()
    if args.command in NODE_COMMANDS:
        return nodecommands.run(args, state_dir)
    if args.command == "up":
        return _run_up(args, state_dir)
    return _down(state_dir)


def _run_up(args: argparse.Namespace, state_dir: Path) -> int:
    """``up`` after argparse: the inputs checked, then the machine, then the start."""
    if args.timeout <= 0:
        _err("--timeout must be positive")
        return EXIT_USAGE
    try:
        pools = parse_node_pools(args.node_pool)
        label = validate_label_name(args.gpu_product_label)
        real_node = _real_node(args)
    except (NodePoolError, RealNodeSpecError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    # Before anything starts: a machine that cannot run the node is refused in one line.
    problem = None if real_node is None else unavailable()
    if problem is not None:
        _err(f"cannot start the real node: {problem}")
        return EXIT_USAGE
    return _up(
        state_dir,
        args.timeout,
        scheduling=args.scheduling or bool(pools),
        pools=pools,
        product_label=label,
        real_node=real_node,
        kserve=args.kserve,
    )


if __name__ == "__main__":
    sys.exit(main())

"""The node subcommands of ``python -m infercrane_dev.localcluster``: nodes, add-pool, delete-node.

They act as admin on a cluster started by ``up`` (found through ``--dir``) or on any local
control plane given by ``--kubeconfig`` (e.g. a test session's), so a second process can
grow, shrink and inspect the simulated GPU nodes that another process started.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .admin import new_api_client
from .kubeconfig import ADMIN_CONTEXT
from .nodepools import DEFAULT_PRODUCT_LABEL, NodePool, NodePoolError, parse_node_pools
from .state import StateError, load_state

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


@dataclass(frozen=True)
class Target:
    """Which cluster a node command acts on, and its product label."""

    kubeconfig: Path
    product_label: str
    scheduling: bool


def add_target_arguments(parser: argparse.ArgumentParser, dir_help: str) -> None:
    parser.add_argument("--dir", type=Path, help=dir_help)
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="act on this local control plane's kubeconfig (admin context) instead of --dir",
    )
    parser.add_argument(
        "--gpu-product-label",
        help=f"with --kubeconfig: Node label of the GPU product (default {DEFAULT_PRODUCT_LABEL})",
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], dir_help: str) -> None:
    """Add the node subcommands to the CLI's parser."""
    nodes = commands.add_parser("nodes", help="list the simulated GPU nodes")
    add_target_arguments(nodes, dir_help)
    nodes.add_argument("--product", help="only the nodes of this GPU product")
    add = commands.add_parser("add-pool", help="add simulated GPU nodes to a running cluster")
    add_target_arguments(add, dir_help)
    add_pool_argument(add, required=True)
    add.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait until schedulable"
    )
    delete = commands.add_parser("delete-node", help="delete one simulated GPU node")
    add_target_arguments(delete, dir_help)
    delete.add_argument("name", help="node name, as listed by `nodes`")


def add_pool_argument(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--node-pool",
        action="append",
        default=[],
        required=required,
        metavar="PRODUCT=NODESxGPUS",
        help="simulated GPU nodes, e.g. NVIDIA-L40S=2x1 (2 nodes with 1 GPU each); repeatable",
    )


def _err(message: str) -> None:
    print(f"localcluster: {message}", file=sys.stderr)


def resolve_target(args: argparse.Namespace, state_dir: Path) -> Target | int:
    """The cluster named by ``--kubeconfig`` or recorded in ``state_dir``; else an exit code."""
    if args.kubeconfig is not None:
        if args.dir is not None:
            _err("give either --dir or --kubeconfig, not both")
            return EXIT_USAGE
        label = args.gpu_product_label or DEFAULT_PRODUCT_LABEL
        return Target(args.kubeconfig.absolute(), label, scheduling=True)
    if args.gpu_product_label is not None:
        _err("--gpu-product-label goes with --kubeconfig; `up` recorded the label in --dir")
        return EXIT_USAGE
    try:
        state = load_state(state_dir)
    except StateError as exc:
        _err(str(exc))
        return EXIT_FAILED
    if state is None or not state.any_running():
        _err(f"no running local control plane recorded in {state_dir}")
        return EXIT_FAILED
    return Target(state.kubeconfig_path, state.gpu_product_label, state.scheduling)


def parse_pools(specs: list[str]) -> tuple[NodePool, ...] | int:
    try:
        return parse_node_pools(specs)
    except NodePoolError as exc:
        _err(str(exc))
        return EXIT_USAGE


def run(args: argparse.Namespace, state_dir: Path) -> int:
    """Run one node subcommand (after argparse); returns the exit code."""
    pools: tuple[NodePool, ...] = ()
    if args.command == "add-pool":
        parsed = parse_pools(args.node_pool)
        if isinstance(parsed, int):
            return parsed
        pools = parsed
        if args.timeout <= 0:
            _err("--timeout must be positive")
            return EXIT_USAGE
    target = resolve_target(args, state_dir)
    if isinstance(target, int):
        return target
    # Imported here: the kubernetes client is slow to import and `up`/`down` never need it.
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from .nodes import NodeOperationError

    try:
        with new_api_client(target.kubeconfig, ADMIN_CONTEXT) as api:
            return _dispatch(args, target, api, pools)
    except (ApiException, HTTPError, NodeOperationError, OSError) as exc:
        # One line: an ApiException's text goes on with response headers and body.
        first_line = (str(exc) or repr(exc)).splitlines()[0]
        _err(f"{args.command} failed: {first_line}")
        return EXIT_FAILED


def _dispatch(
    args: argparse.Namespace,
    target: Target,
    api: ApiClient,
    pools: tuple[NodePool, ...],
) -> int:
    from .nodes import add_node_pool, delete_node, list_pool_nodes, list_simulated_nodes

    label = target.product_label
    if args.command == "nodes":
        listed = (
            list_pool_nodes(api, args.product, product_label=label)
            if args.product
            else list_simulated_nodes(api, product_label=label)
        )
        print(f"{'NAME':<40} {'PRODUCT':<32} {'GPUS':>4} READY")
        for node in listed:
            ready = "yes" if node.ready and node.schedulable else "no"
            print(f"{node.name:<40} {node.product:<32} {node.gpus:>4} {ready}")
        return EXIT_OK
    if args.command == "add-pool":
        if not target.scheduling:
            _err("this cluster was started without scheduling; `up --scheduling` first")
            return EXIT_FAILED
        for pool in pools:
            names = add_node_pool(api, pool, product_label=label, wait_ready=args.timeout)
            print(f"added {pool.spec}: {' '.join(names)}")
        return EXIT_OK
    delete_node(api, args.name)
    print(f"deleted node {args.name}")
    return EXIT_OK

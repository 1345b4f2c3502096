"""How the local control plane runs etcd: its flags (pure, no I/O).

One member on loopback, plain HTTP (only the API server, on the same machine, is a client),
data in the workdir, and no fsync: a throwaway cluster gains nothing from it.
"""

from __future__ import annotations

from pathlib import Path

from .ports import LOOPBACK


def etcd_args(data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client_url = f"http://{LOOPBACK}:{client_port}"
    peer_url = f"http://{LOOPBACK}:{peer_port}"
    return [
        "--name=infercrane",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=infercrane={peer_url}",
        "--initial-cluster-state=new",
        # A throwaway cluster gains nothing from fsync and start-up is much faster without it.
        "--unsafe-no-fsync=true",
    ]

"""Pick free loopback TCP ports for the local control plane.

Ports are chosen by letting the kernel assign them, so there is a small window
between choosing and the server binding in which another program could take
one; callers surface that as a start failure.  This module must never bind
anything but 127.0.0.1 and must not hold ports open after returning.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """Return ``count`` distinct ports that were free on 127.0.0.1 a moment ago."""
    if count < 0:
        raise ValueError("count must be >= 0")
    sockets: list[socket.socket] = []
    try:
        # All sockets stay bound until every port is chosen, otherwise the kernel
        # could hand out the same ephemeral port twice.
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((LOOPBACK, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    """Return one port that was free on 127.0.0.1 a moment ago."""
    return free_ports(1)[0]

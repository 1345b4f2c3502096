"""A loopback TCP proxy in front of a server (the API server, a database) that a test can cut
and restore, to make the server "go away" in the middle of a run without touching it (it may
be anyone's: the proxy only forwards bytes, TLS stays end to end), or freeze, to make it fall
silent with every connection still open, as behind a partition."""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time

from infercrane_dev.localcluster.ports import LOOPBACK


class CuttableProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._frozen = threading.Event()
        self.port = 0

    def start(self) -> CuttableProxy:
        # create_server sets SO_REUSEADDR, so a restored proxy gets its old port back.
        listener = socket.create_server((LOOPBACK, self.port))
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def cut(self) -> None:
        """Refuse new connections and reset every open one, as a vanished server would."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, set()
        if listener is not None:
            # close() alone leaves a thread blocked in accept() holding the socket open, and
            # it accepts one more connection after the cut; shutdown() wakes it and refuses.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()

    def freeze(self) -> None:
        """Forward nothing more, either way, and close nothing: both ends wait in silence."""
        self._frozen.set()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                downstream, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                downstream.close()
                continue
            with self._lock:
                self._open |= {downstream, upstream}
            threading.Thread(target=self._pump, args=(downstream, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    if self._frozen.is_set():
                        if a.fileno() < 0:  # cut while frozen
                            return
                        time.sleep(0.2)
                        continue
                    for key, _ in selector.select(timeout=1):
                        data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                        if not data:
                            return
                        peers[key.fileobj].sendall(data)  # type: ignore[index]
            except OSError:
                return
            finally:
                for sock in peers:
                    with contextlib.suppress(OSError):
                        sock.close()

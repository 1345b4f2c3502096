"""A throwaway S3-compatible server: versitygw (built by ``hack/tools/build.sh``) serving a private
directory through its POSIX backend, for the shared-state tests and the benchmarks.

It listens on a free 127.0.0.1 port over plain HTTP; one bucket is a directory under its root.
The root account's keys are random per server and reach versitygw and the engine through the
environment only (``variables``), never a command line. ``stop`` removes the directory.
"""

from __future__ import annotations

import contextlib
import http.client
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from infercrane_dev.localcluster.ports import LOOPBACK, free_port
from infercrane_dev.localcluster.processes import (
    ManagedProcess,
    start_process,
    stop_process,
    wait_until_ready,
)
from infercrane_dev.toolchain import find_binary
from infercrane_pulumi.automation.state import s3 as signed
from infercrane_pulumi.objects.naming import PROJECT_NAME

BUCKET = "infercrane-state"
REGION = "us-east-1"
READY_SECONDS = 30.0
# versitygw's POSIX backend removes a directory that a delete left empty, and its parents, up
# to the first one that was itself put as an object; a put creating a sibling directory under
# the same parent at that moment fails its mkdir and answers 409 (seen in CI). Pulumi puts and
# deletes a lock under <this>/<stack>/ in every run of every stack, so this prefix is put as a
# directory object once, and no run's cleanup removes what another run's put is creating.
KEPT_PREFIX = f".pulumi/locks/organization/{PROJECT_NAME}/"


@dataclass
class S3Server:
    directory: Path
    port: int
    access_key: str
    secret_key: str = field(repr=False)
    process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """The backend URL: the bucket at this endpoint, path-style, plain HTTP on loopback."""
        endpoint = f"http://{LOOPBACK}:{self.port}"
        return f"s3://{BUCKET}?endpoint={endpoint}&region={REGION}&use_path_style=true"

    @property
    def variables(self) -> dict[str, str]:
        """What the engine's S3 client reads: this server's keys, and no ambient AWS profile."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }

    @property
    def root(self) -> Path:
        return self.directory / "root"

    def start(self) -> S3Server:
        (self.root / BUCKET).mkdir(parents=True, exist_ok=True)
        argv = [str(find_binary("versitygw")), "--port", f"{LOOPBACK}:{self.port}"]
        argv += ["posix", "--sidecar", str(self.directory / "meta"), str(self.root)]
        environment = {
            "ROOT_ACCESS_KEY_ID": self.access_key,
            "ROOT_SECRET_ACCESS_KEY": self.secret_key,
            "PATH": "/usr/bin:/bin",
        }
        (self.directory / "meta").mkdir(exist_ok=True)
        self.process = start_process("versitygw", argv, self.directory / "log", env=environment)
        wait_until_ready(self.process, self._answers, timeout=READY_SECONDS)
        status = self.request("PUT", KEPT_PREFIX)
        if status != 200:
            raise RuntimeError(f"versitygw: PUT {KEPT_PREFIX} answered {status}")
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def request(self, method: str, key: str) -> int:
        """``method`` (PUT or DELETE) on the object ``key`` with an empty body (a PUT of a key
        ending in ``/`` is a directory object), signed as the root account by the product's
        own S3 door; the status it answered (its body may echo the request: not kept)."""
        status, _ = signed.request(signed.bucket(self.url, self.variables), method, key, {})
        return status

    def _answers(self) -> bool:
        connection = http.client.HTTPConnection(LOOPBACK, self.port, timeout=2)
        try:
            connection.request("GET", "/")
            connection.getresponse().read()
            return True
        finally:
            connection.close()


@contextlib.contextmanager
def running() -> Iterator[S3Server]:
    """A started server over a private directory, stopped and removed on exit."""
    server = S3Server(
        Path(tempfile.mkdtemp(prefix="infercrane-s3-")),
        free_port(),
        access_key="infercrane" + secrets.token_hex(4),
        secret_key=secrets.token_urlsafe(24),
    )
    try:
        yield server.start()
    finally:
        server.remove()

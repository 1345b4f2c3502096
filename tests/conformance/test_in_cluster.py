"""A driver inside the cluster, as its Pod's ServiceAccount: the context ``in-cluster``.

What the context reads of a Pod is exactly two things: ``KUBERNETES_SERVICE_HOST``/``_PORT``, and
the kubelet's ServiceAccount mount at ``/var/run/secrets/kubernetes.io/serviceaccount`` (the
token, the cluster's CA). Here the driver runs in a mount namespace of its own (``unshare``,
as root) where a directory of the test is bound at that path, holding a token the TokenRequest
API issued for the namespace's shipped ``infercrane-control-plane`` ServiceAccount (bound to a
Secret, so that deleting the Secret revokes it) and the API server's CA; no kubelet runs it.
The driver is given no kubeconfig, and ``make test`` exports a decoy ``KUBECONFIG`` beside it.

A rotation replaces the token file, as the kubelet does, and revokes the old token at once:
the kubelet keeps an old token valid until it expires, so a run that kept reading it would
pass there for minutes; here it fails, and the run after a rotation proves the file is read
again.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from infercrane_dev.localcluster.bootstrap import CONTROL_PLANE_ACCOUNT
from infercrane_pulumi.automation import NamespaceStack, PulumiEnvironment
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.intents import IN_CLUSTER_CONTEXT, KubernetesSettings
from infercrane_pulumi.errors import ConfigError
from tests.conformance.backends import Tenant
from tests.conformance.faults import checker
from tests.conformance.faults.driver import Driver
from tests.conformance.harness import IMAGE, Harness, intent, replica, wait_for
from tests.conformance.identity import ProviderIdentity
from tests.conformance.replica import SharedBackend
from tests.conformance.test_cli_and_faults import cli_env
from tests.runguard import by_a_person

pytestmark = pytest.mark.conformance

MOUNT = kubeconfigs.SERVICE_ACCOUNT_DIR


class ServiceAccountMount:
    """The kubelet's side: the mounted directory, the API server's address as a Pod's
    environment gives it, and the token the kubelet would project and rotate."""

    def __init__(
        self, directory: Path, provider: ProviderIdentity, admin: client.ApiClient
    ) -> None:
        self.directory = directory
        self.namespace = provider.namespace
        self.admin = admin
        cluster = provider.document()["clusters"][0]["cluster"]
        address = urlsplit(cluster["server"])
        assert address.hostname is not None and address.port is not None, cluster["server"]
        self.host, self.port = address.hostname, address.port
        directory.mkdir(mode=0o755)
        ca = base64.b64decode(cluster["certificate-authority-data"])
        (directory / "ca.crt").write_bytes(ca)
        self.binding = ""  # the Secret the current token is bound to
        self.token = ""

    @property
    def wrapper(self) -> list[str]:
        """The command a driver runs under to be in this "Pod"."""
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            'mount --bind "$0" "$1" && shift && exec "$@"',
            str(self.directory),
            str(MOUNT),
            "env",
            f"KUBERNETES_SERVICE_HOST={self.host}",
            f"KUBERNETES_SERVICE_PORT={self.port}",
        ]

    def rotate(self) -> str:
        """A new token in the mount (written whole, then renamed, as the kubelet swaps its
        files), the old one revoked; the old token."""
        core = client.CoreV1Api(self.admin)
        secret = core.create_namespaced_secret(
            self.namespace,
            client.V1Secret(metadata=client.V1ObjectMeta(generate_name="pod-binding-")),
        )
        assert secret.metadata is not None and secret.metadata.name is not None
        bound = client.V1BoundObjectReference(
            api_version="v1", kind="Secret", name=secret.metadata.name, uid=secret.metadata.uid
        )
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[], expiration_seconds=600, bound_object_ref=bound
            )
        )
        issued = core.create_namespaced_service_account_token(
            CONTROL_PLANE_ACCOUNT, self.namespace, request
        )
        assert issued.status is not None
        old, self.token = self.token, str(issued.status.token)
        with tempfile.NamedTemporaryFile("w", dir=self.directory, delete=False) as written:
            written.write(self.token)
        os.chmod(written.name, 0o644)
        os.replace(written.name, self.directory / "token")
        if self.binding:
            core.delete_namespaced_secret(self.binding, self.namespace)
        self.binding = secret.metadata.name
        return old

    def refused(self, token: str) -> bool:
        return not self.accepted(token)

    def accepted(self, token: str) -> bool:
        """Whether the API server takes ``token`` (a review of it, as admin)."""
        review = client.AuthenticationV1Api(self.admin).create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        )
        return review.status is not None and bool(review.status.authenticated)


@pytest.fixture
def mount_point() -> Iterator[Path]:
    """The kubelet's mount point, made on this host if it lacks one (an empty directory: a
    driver outside the test's mount namespace finds no token in it) and removed after."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a mount namespace needs root and unshare (util-linux)")
    made = [parent for parent in (MOUNT, *MOUNT.parents) if not parent.exists()]
    MOUNT.mkdir(parents=True, exist_ok=True)
    yield MOUNT
    for directory in made:
        with contextlib.suppress(OSError):
            directory.rmdir()


def keys_of(admin: Cluster, namespace: str) -> set[tuple[str, str | None]]:
    """Every Deployment and Service of ``namespace``, by kind and key, read as admin."""
    listed = checker.listed(admin, namespace)
    return {(kind, checker.key_of(meta)) for (kind, _), meta in listed.items()}


def objects(*keys: str) -> set[tuple[str, str | None]]:
    return {(kind, key) for key in keys for kind in ("Deployment", "Service")}


def settings_in_cluster(tenant: Tenant) -> dict[str, Any]:
    return {"context": IN_CLUSTER_CONTEXT, "namespace": tenant.namespace, "imageDigest": IMAGE}


def test_a_driver_in_a_pod_runs_as_its_service_account_across_token_rotations(
    tenant: Tenant, admin_client: client.ApiClient, mount_point: Path, tmp_path: Path
) -> None:
    pod = ServiceAccountMount(tmp_path / "serviceaccount", tenant.provider, admin_client)
    pod.rotate()
    backend = SharedBackend(url=(tmp_path / "state").as_uri(), variables={})
    (tmp_path / "state").mkdir()
    driver = Driver(tmp_path / "driver", backend, settings_in_cluster(tenant), pod.wrapper)
    namespace = tenant.namespace
    admin = Cluster(RestTransport(admin_client), context="admin")

    try:
        first = driver.call(
            "apply", namespace=namespace, intents=[replica("ic-a"), replica("ic-b")]
        )
        assert first["ok"], first
        assert first["changes"] == {"ic-a": "create", "ic-b": "create"}
        assert keys_of(admin, namespace) == objects("ic-a", "ic-b")

        for round_ in range(2):  # each run after a rotation, the old token already refused
            old = pod.rotate()
            # The API server caches a token's review for seconds after its Secret went.
            wait_for(functools.partial(pod.refused, old), timeout=60, what="the old token revoked")
            assert pod.accepted(pod.token)
            added = f"ic-c{round_}"
            wanted = [replica("ic-a"), replica("ic-b"), replica(added)]
            grown = driver.call("apply", namespace=namespace, intents=wanted)
            assert grown["ok"], grown
            assert grown["changes"] == {"ic-a": "same", "ic-b": "same", added: "create"}
            removed = driver.call("remove", namespace=namespace, key=added)
            assert removed["ok"], removed
            assert keys_of(admin, namespace) == objects("ic-a", "ic-b")

        gone = driver.call("destroy", namespace=namespace)
        assert gone["ok"], gone
        assert keys_of(admin, namespace) == set()
    finally:
        driver.close()
    assert (tmp_path / "driver" / "stderr").read_text() == ""


def test_in_cluster_outside_a_pod_or_with_a_kubeconfig_is_refused_in_one_line(
    tenant: Tenant,
    admin_client: client.ApiClient,
    pulumi_env: PulumiEnvironment,
    mount_point: Path,
    tmp_path: Path,
) -> None:
    """On this host (no token mounted, no KUBERNETES_SERVICE_HOST): refused before anything
    is read or written; and a kubeconfig beside the context contradicts it."""
    settings = KubernetesSettings.model_validate(settings_in_cluster(tenant))
    with pytest.raises(ConfigError) as refused:
        NamespaceStack(settings, pulumi_env, tmp_path / "workspace").ensure([intent("ic-a")])
    assert refused.value.problems == (
        "infercrane:kubernetes.context: 'in-cluster' is the ServiceAccount of the Pod this "
        "runs in, and this process is not in one (missing: KUBERNETES_SERVICE_HOST, "
        f"KUBERNETES_SERVICE_PORT, {MOUNT}/token, {MOUNT}/ca.crt)",
    )
    assert (
        not client.AppsV1Api(tenant.provider.api_client())
        .list_namespaced_deployment(tenant.namespace)
        .items
    )
    assert not list(tmp_path.glob("workspace/**/*"))  # no project, no stack file
    with pytest.raises(ValueError, match="reads no kubeconfig"):
        KubernetesSettings.model_validate(
            settings_in_cluster(tenant) | {"kubeconfig": str(tenant.provider.kubeconfig)}
        )


def test_the_command_line_and_a_persons_pulumi_up_in_a_pod_take_the_same_context(
    harness: Harness, admin_client: client.ApiClient, mount_point: Path, tmp_path: Path
) -> None:
    """The stack file names ``in-cluster`` and no kubeconfig; the process's ``KUBECONFIG``
    names a file that does not exist, which neither reads."""
    pod = ServiceAccountMount(tmp_path / "serviceaccount", harness.provider, admin_client)
    pod.rotate()
    admin = Cluster(RestTransport(admin_client), context="admin")
    no_kubeconfig = {"KUBECONFIG": str(tmp_path / "no-such-kubeconfig")}
    harness.configure([replica("ic-cli")], context=IN_CLUSTER_CONTEXT)
    cli = harness.cli_up(cli_env(harness) | no_kubeconfig, wrapper=pod.wrapper)
    assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-2000:]
    assert keys_of(admin, harness.namespace) == objects("ic-cli")

    harness.configure([replica("ic-cli"), replica("ic-hand")], context=IN_CLUSTER_CONTEXT)
    project = harness.by_hand_project(tmp_path / "by-hand")
    person = by_a_person(
        subprocess.run,
        [*pod.wrapper, "pulumi", "up", "--yes", "--stack", harness.stack_name, "--non-interactive"],
        cwd=project,
        env=harness.process_env() | harness.env.variables() | no_kubeconfig,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert person.returncode == 0, person.stdout[-2000:] + person.stderr[-2000:]
    assert keys_of(admin, harness.namespace) == objects("ic-cli", "ic-hand")

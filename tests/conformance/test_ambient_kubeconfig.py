"""A run reaches the cluster its caller configured, whatever the driver's process environment
holds: a control plane's own process has a ``KUBECONFIG`` for its own cluster, often with
context names another cluster's kubeconfig shares (issue 39).

Every scenario runs with an ambient ``KUBECONFIG`` that either lacks the run's context or holds
a decoy context of the same name whose server is a tripwire: a loopback listener that counts
every connection made to it. Objects are read back as admin from the configured cluster, and
the tripwire must have seen nothing.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from infercrane_pulumi import kinds, naming
from infercrane_pulumi.automation import NamespaceStack, ensure_many
from infercrane_pulumi.intents import KubernetesSettings, ReplicaIntent
from tests.conformance.backends import Tenant
from tests.conformance.harness import Harness, intent, replica
from tests.runguard import by_a_person

pytestmark = pytest.mark.conformance


class Tripwire:
    """A loopback TCP listener that counts the connections made to it and answers none."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._socket.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self._socket.close()
        self._thread.join(timeout=5)


@dataclasses.dataclass(frozen=True)
class Ambient:
    """The driver's ambient ``KUBECONFIG``: the file, and the tripwire its contexts reach."""

    kubeconfig: Path
    tripwire: Tripwire


def decoy_kubeconfig(path: Path, contexts: list[str], server: str) -> Path:
    """A kubeconfig whose every context (and its current one) reaches ``server``."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "decoy", "cluster": {"server": server}}],
        "users": [{"name": "decoy", "user": {"token": "decoy-token"}}],
        "contexts": [
            {"name": name, "context": {"cluster": "decoy", "user": "decoy"}}
            for name in [*contexts, "elsewhere"]
        ],
        "current-context": "elsewhere",
    }
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture(params=["without the context", "with a decoy of the same name"])
def ambient(
    request: pytest.FixtureRequest,
    harness: Harness,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Ambient]:
    """This process's ``KUBECONFIG``: a file without the provider's context, or with a decoy
    context of the same name (each tenant's provider context has the same name)."""
    tripwire = Tripwire()
    contexts = [] if request.param == "without the context" else [harness.provider.context]
    path = decoy_kubeconfig(tmp_path / "ambient-kubeconfig", contexts, tripwire.url)
    monkeypatch.setenv("KUBECONFIG", str(path))
    yield Ambient(path, tripwire)
    tripwire.close()


def owned_names(harness: Harness, namespace: str | None = None) -> set[str]:
    return {
        obj["metadata"]["name"]
        for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
        for obj in harness.admin.select(kind, namespace or harness.namespace, naming.OWNED_SELECTOR)
    }


def names_of(*keys: str) -> set[str]:
    return {naming.object_name(key) for key in keys}


def test_namespace_stack_ensure_remove_and_destroy_reach_only_the_configured_cluster(
    harness: Harness, ambient: Ambient, tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "workspace")
    created = stack.ensure([intent("amb-a"), intent("amb-b")])
    assert [r.change for r in created.replicas] == ["create", "create"]
    assert owned_names(harness) == names_of("amb-a", "amb-b")
    removed = stack.remove("amb-a")
    assert {r.external_key: r.change for r in removed.replicas} == {
        "amb-a": "delete",
        "amb-b": "same",
    }
    assert owned_names(harness) == names_of("amb-b")
    stack.destroy()
    assert owned_names(harness) == set()
    assert ambient.tripwire.connections == 0


def test_ensure_many_serves_two_namespaces_each_through_its_own_kubeconfig_at_once(
    harness: Harness,
    ambient: Ambient,
    tenants: Callable[[int], list[Tenant]],
    tmp_path: Path,
) -> None:
    """Two namespaces, each with its own provider identity in its own kubeconfig, under one
    context name: each identity may write only its own namespace, so a program that took the
    other run's kubeconfig (or the process's) would be refused."""
    pair = tenants(2)
    assert pair[0].provider.context == pair[1].provider.context == harness.provider.context
    requests: dict[str, tuple[NamespaceStack, list[ReplicaIntent]]] = {}
    for index, tenant in enumerate(pair):
        settings = KubernetesSettings.model_validate(
            harness.kubernetes(namespace=tenant.namespace, context=tenant.provider.context)
        )
        env = dataclasses.replace(harness.env, kubeconfig=tenant.provider.kubeconfig)
        stack = NamespaceStack(
            settings, env, tmp_path / f"ws-{index}", stack_name=f"{harness.stack_name}-{index}"
        )
        requests[tenant.namespace] = (stack, [intent(f"many-{index}-a"), intent(f"many-{index}-b")])

    outcomes = ensure_many(requests, parallel=2)

    for index, tenant in enumerate(pair):
        outcome = outcomes[tenant.namespace]
        assert outcome.error is None, outcome.error
        assert outcome.result is not None
        assert [r.change for r in outcome.result.replicas] == ["create", "create"]
        assert owned_names(harness, tenant.namespace) == names_of(
            f"many-{index}-a", f"many-{index}-b"
        )
    assert ambient.tripwire.connections == 0


def test_the_command_line_reaches_the_kubeconfig_its_stack_file_names(
    harness: Harness, ambient: Ambient
) -> None:
    """The stack file names the kubeconfig: the process's ``KUBECONFIG`` (the command line's
    documented fallback) is not used, by its checks nor by its engine."""
    harness.configure([replica("amb-cli")], kubeconfig=str(harness.provider.kubeconfig))
    assert harness.env.state_dir is not None and harness.env.bin_dir is not None
    environment = os.environ | {
        "PULUMI_BACKEND_URL": harness.env.state_dir.as_uri(),
        "PULUMI_CONFIG_PASSPHRASE": harness.env.passphrase,
        "PULUMI_HOME": str(harness.env.pulumi_home),
        "INFERCRANE_TOOLS_BIN": str(harness.env.bin_dir),
    }
    assert environment["KUBECONFIG"] == str(ambient.kubeconfig)
    done = harness.cli(
        "up",
        "--stack",
        harness.stack_name,
        "--project-dir",
        str(harness.project_dir),
        "--json",
        env=environment,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert owned_names(harness) == names_of("amb-cli")
    assert ambient.tripwire.connections == 0


def by_hand(harness: Harness, project: Path, environment: dict[str, str]) -> subprocess.Popen[str]:
    return by_a_person(
        subprocess.Popen,
        ["pulumi", "up", "--yes", "--stack", harness.stack_name, "--non-interactive"],
        cwd=project,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_person_pulumi_up_reaches_the_kubeconfig_its_stack_file_names(
    harness: Harness, ambient: Ambient, tmp_path: Path
) -> None:
    harness.configure([replica("amb-hand")], kubeconfig=str(harness.provider.kubeconfig))
    harness.stack()  # the stack exists, as a person's `pulumi stack init` makes it
    project = harness.by_hand_project(tmp_path / "by-hand")
    person = harness.process_env() | harness.env.variables()
    # Their shell's KUBECONFIG, not the provider's; and a variable that would force applies.
    environment = person | {"KUBECONFIG": str(ambient.kubeconfig)}
    forced = by_hand(harness, project, environment | {"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"})
    out, _ = forced.communicate(timeout=300)
    assert forced.returncode != 0
    assert (
        "PULUMI_K8S_ENABLE_PATCH_FORCE=true makes pulumi-kubernetes force its applies over "
        "other field managers, which InferCrane never does: unset it"
    ) in out
    assert owned_names(harness) == set()
    done = by_hand(harness, project, environment)
    out, _ = done.communicate(timeout=300)
    assert done.returncode == 0, out[-3000:]
    assert owned_names(harness) == names_of("amb-hand")
    assert ambient.tripwire.connections == 0

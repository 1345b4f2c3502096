"""A run reaches the cluster its caller configured, whatever the driver's process environment
and working directories hold: a control plane's own process has a ``KUBECONFIG`` for its own
cluster, often with context names another cluster's kubeconfig shares (issues 39 and 49).

Every scenario runs beside a decoy whose server is a tripwire: a loopback listener that counts
every connection made to it. The decoys are each place client-go, kubectl or a relative path
could find another cluster: an ambient ``KUBECONFIG`` (lacking the run's context, or with a
decoy context of the same name), ``$HOME/.kube/config``, the in-cluster fallback
(``KUBERNETES_SERVICE_HOST``/``PORT``), the given kubeconfig's own ``current-context``, and, for
a kubeconfig named by a relative path, a file of that name in the stack's workspace (where the
provider plugin runs) or in the working directory the program is served in. Objects are read
back as admin from the configured cluster, and the tripwire must have seen nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import yaml

from infercrane_pulumi.automation import NamespaceStack, ensure_many
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.backends import Tenant
from tests.conformance.harness import Harness, intent, replica
from tests.runguard import by_a_person

pytestmark = pytest.mark.conformance


class Tripwire:
    """A loopback TCP listener that counts the connections made to it and answers none. It
    stops by itself after ``seconds`` (no test outlives it), or when closed."""

    def __init__(self, seconds: float = 900.0) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.1)  # so that the loop sees its deadline and close()
        self.port: int = self._socket.getsockname()[1]
        self.connections = 0
        self._deadline = time.monotonic() + seconds
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        with self._socket:
            while not self._closed.is_set() and time.monotonic() < self._deadline:
                try:
                    connection, _ = self._socket.accept()
                except TimeoutError:
                    continue
                self.connections += 1
                connection.close()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)


@pytest.fixture
def tripwire() -> Iterator[Tripwire]:
    wire = Tripwire()
    yield wire
    wire.close()


def decoy_kubeconfig(path: Path, contexts: list[str], server: str) -> Path:
    """A kubeconfig whose every context (and its current one) reaches ``server``."""
    path.parent.mkdir(parents=True, exist_ok=True)
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


def with_decoy_current_context(real: Path, copy: Path, server: str) -> Path:
    """``real`` with one more context, its current one, that reaches ``server``."""
    document = yaml.safe_load(real.read_text())
    document["clusters"].append({"name": "decoy", "cluster": {"server": server}})
    document["users"].append({"name": "decoy", "user": {"token": "decoy-token"}})
    document["contexts"].append({"name": "decoy", "context": {"cluster": "decoy", "user": "decoy"}})
    document["current-context"] = "decoy"
    copy.write_text(yaml.safe_dump(document))
    copy.chmod(0o600)
    return copy


@dataclasses.dataclass(frozen=True)
class Ambient:
    """Where the decoy sits: the variables it sets in this process (None: unset), and how a
    test names a real kubeconfig (``given``: as is, or a copy whose current context is the
    decoy)."""

    variables: Mapping[str, str | None]
    given: Callable[[Path], Path]
    tripwire: Tripwire

    def over(self, environ: Mapping[str, str]) -> dict[str, str]:
        """``environ`` with this decoy's variables, as another process would hold them."""
        unset = {name for name, value in self.variables.items() if value is None}
        return {k: v for k, v in environ.items() if k not in unset} | {
            name: value for name, value in self.variables.items() if value is not None
        }


AMBIENT_DECOYS = [
    "KUBECONFIG without the context",
    "KUBECONFIG with a decoy of the same name",
    "$HOME/.kube/config with a decoy of the same name",
    "KUBERNETES_SERVICE_HOST and _PORT at a decoy",
    "the given kubeconfig's current-context a decoy",
]


@pytest.fixture(params=AMBIENT_DECOYS)
def ambient(
    request: pytest.FixtureRequest,
    harness: Harness,
    tripwire: Tripwire,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Ambient:
    """A decoy in this process's surroundings (each tenant's provider context has the same
    name, so a decoy context of that name would be taken for it)."""
    decoy, context = request.param, harness.provider.context
    home = tmp_path / "home"  # for the variables' cases: nothing there
    home.mkdir()
    variables: dict[str, str | None] = {}
    if decoy.startswith("KUBECONFIG"):
        contexts = [] if decoy == "KUBECONFIG without the context" else [context]
        path = decoy_kubeconfig(tmp_path / "ambient-kubeconfig", contexts, tripwire.url)
        variables["KUBECONFIG"] = str(path)
    elif decoy.startswith("$HOME"):
        decoy_kubeconfig(home / ".kube" / "config", [context], tripwire.url)
        variables |= {"KUBECONFIG": None, "HOME": str(home)}
    elif decoy.startswith("KUBERNETES_SERVICE"):
        variables |= {
            "KUBECONFIG": None,
            "HOME": str(home),
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(tripwire.port),
        }
    for name, value in variables.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)

    def given(real: Path) -> Path:
        if decoy != "the given kubeconfig's current-context a decoy":
            return real
        copy = tmp_path / f"given-{uuid.uuid4().hex[:8]}"  # tenants' files may share a name
        return with_decoy_current_context(real, copy, tripwire.url)

    return Ambient(variables, given, tripwire)


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
    env = dataclasses.replace(harness.env, kubeconfig=ambient.given(harness.provider.kubeconfig))
    stack = harness.namespace_stack(tmp_path / "workspace", env=env)
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
        env = dataclasses.replace(harness.env, kubeconfig=ambient.given(tenant.provider.kubeconfig))
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
    given = ambient.given(harness.provider.kubeconfig)
    harness.configure([replica("amb-cli")], kubeconfig=str(given))
    assert harness.env.state_dir is not None and harness.env.bin_dir is not None
    environment = os.environ | {
        "PULUMI_BACKEND_URL": harness.env.state_dir.as_uri(),
        "PULUMI_CONFIG_PASSPHRASE": harness.env.passphrase,
        "PULUMI_HOME": str(harness.env.pulumi_home),
        "INFERCRANE_TOOLS_BIN": str(harness.env.bin_dir),
    }
    assert environment == ambient.over(environment)  # the decoy's variables included
    done = harness.cli_up(environment)
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
    given = ambient.given(harness.provider.kubeconfig)
    harness.configure([replica("amb-hand")], kubeconfig=str(given))
    harness.stack()  # the stack exists, as a person's `pulumi stack init` makes it
    project = harness.by_hand_project(tmp_path / "by-hand")
    person = harness.process_env() | harness.env.variables()
    # Their shell's decoy (KUBECONFIG, HOME, ...), not the provider's kubeconfig; and a
    # variable that would force applies.
    environment = ambient.over(person)
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


RELATIVE_CASES = list(
    itertools.product(
        ["PulumiEnvironment.kubeconfig", "infercrane:kubernetes.kubeconfig"],
        ["the workspace", "the working directory at run time"],
    )
)


@pytest.mark.parametrize(
    "case", RELATIVE_CASES, ids=[f"named by {n}, decoy in {d}" for n, d in RELATIVE_CASES]
)
def test_a_relative_kubeconfig_is_the_file_where_the_caller_named_it(
    harness: Harness,
    tripwire: Tripwire,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[str, str],
) -> None:
    """Issue 49: ``kc.yaml``, named where the caller's working directory holds the real file,
    while a decoy ``kc.yaml`` with the same context name sits in the stack's workspace (where
    the engine runs the provider plugin), or in the directory the driver has moved to when it
    runs (where the program is served). The checks, the identity check and the provider all
    read the caller's file."""
    named_by, decoy_in = case
    caller, workspace, moved = tmp_path / "caller", tmp_path / "workspace", tmp_path / "moved"
    caller.mkdir()
    shutil.copyfile(harness.provider.kubeconfig, caller / "kc.yaml")
    decoy_dir = workspace if decoy_in == "the workspace" else moved
    decoy_kubeconfig(decoy_dir / "kc.yaml", [harness.provider.context], tripwire.url)
    monkeypatch.chdir(caller)
    if named_by == "PulumiEnvironment.kubeconfig":
        env = dataclasses.replace(harness.env, kubeconfig=Path("kc.yaml"))
        stack = harness.namespace_stack(workspace, env=env)
    else:
        stack = harness.namespace_stack(workspace, kubeconfig="kc.yaml")
    if decoy_in != "the workspace":
        monkeypatch.chdir(moved)

    created = stack.ensure([intent("rel-a")])

    assert [r.change for r in created.replicas] == ["create"]
    assert owned_names(harness) == names_of("rel-a")
    assert tripwire.connections == 0

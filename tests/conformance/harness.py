"""A per-test Pulumi project and stack on the suite's cluster, driven like production.

Each test gets its own namespace (bootstrapped from deploy/kubernetes as admin), the provider
identity of that namespace (its control-plane ServiceAccount, see ``identity.py``), its own
stack name, and a project directory holding only ``Pulumi.yaml`` and
``stacks/Pulumi.<stack>.yaml``: the program itself is the installed package, run through the
real CLI, served from the driver's process as every driver serves it; a person's ``pulumi up``
runs it through the Python language host (``by_hand_project``). Cluster state is always read
back as admin, never from Pulumi.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
import yaml
from pulumi import automation as auto

from infercrane_dev.toolchain import BinaryNotFoundError, find_binary
from infercrane_pulumi import automation
from infercrane_pulumi.automation import NamespaceStack, project
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config.files import STACK_CONFIG_DIR, stack_file
from infercrane_pulumi.config.intents import ALLOW_EMPTY_KEY, KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import kinds, naming
from infercrane_pulumi.objects.kinds import Kind
from tests.conformance.identity import ProviderIdentity

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "registry.example/vllm/vllm-openai@sha256:" + "5e" * 32
T = TypeVar("T")


# What drives a stack, on any cluster.
ENGINE_BINARIES = ("pulumi", "pulumi-language-python", "pulumi-resource-kubernetes")
# ... and what the local control plane runs besides.
LOCAL_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    *ENGINE_BINARIES,
)


def unavailable(reason: str) -> NoReturn:
    """Skip with ``reason``; fail instead when INFERCRANE_REQUIRE_TOOLS=1, as in CI."""
    if os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def require_toolchain(names: tuple[str, ...] = LOCAL_BINARIES) -> Path:
    """The tools' bin dir; skips (fails when INFERCRANE_REQUIRE_TOOLS=1, as in CI) if incomplete."""
    try:
        for name in names:
            find_binary(name)
        return find_binary("pulumi").parent
    except BinaryNotFoundError as missing:
        unavailable(f"hermetic toolchain missing ({missing}); run `make tools`")


# The Pulumi CLIs the run path is tested on, at both ends of the range the docs promise
# (docs/how-to/install.md): the pinned one (the bin dir's), which is also the oldest of the range
# the Go module proxy serves, and the newest it serves, built beside it by the ``pulumi-newest``
# family (hack/tools/README.md). ``@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)``
# runs a test on each; make test runs the newest's cases last, once the family's background build is
# done.
ENGINE_CLIS = (pytest.param("pinned"), pytest.param("newest", marks=pytest.mark.newest_cli))
NEWEST_CLI = Path("pulumi-newest") / "bin"


def engine_cli(which: str) -> Path:
    """The bin dir of the Pulumi CLI ``which`` (one of ``ENGINE_CLIS``); skips like
    ``require_toolchain`` when it is not built."""
    pinned = require_toolchain(ENGINE_BINARIES)
    if which == "pinned":
        return pinned
    newest = pinned / NEWEST_CLI
    if not (newest / "pulumi").is_file():
        unavailable(
            f"the newest Pulumi CLI is missing ({newest / 'pulumi'}); "
            "run `hack/tools/build.sh --only pulumi-newest`"
        )
    return newest


def show(config: pytest.Config, text: str) -> None:
    """Print past pytest's capture, so tracked numbers appear in every run's output."""
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n{text}", flush=True)


def wait_for(probe: Callable[[], T | None], *, timeout: float, what: str) -> T:
    """Poll API state with a deadline; never sleep blindly."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


# A GPU product no cluster has, for scenarios whose Pods need not run: they stay Pending on
# every cluster, so the suite never takes a real GPU or pulls the placeholder image there.
NO_SUCH_GPU = "infercrane-conformance-no-such-gpu"


def replica(key: str, **extra: Any) -> dict[str, Any]:
    return {"externalKey": key, "model": "Qwen/Qwen3-0.6B", "gpu": NO_SUCH_GPU} | extra


def intent(key: str, **extra: Any) -> ReplicaIntent:
    return ReplicaIntent.model_validate(replica(key, **extra))


@dataclass
class Harness:
    provider: ProviderIdentity
    env: automation.PulumiEnvironment  # its kubeconfig is the provider's
    namespace: str
    workdir: Path
    admin: Cluster
    stack_name: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:10]}")
    log: list[str] = field(default_factory=list)

    @property
    def project_dir(self) -> Path:
        return self.workdir / "project"

    @property
    def stack_file(self) -> Path:
        return stack_file(self.project_dir, self.stack_name)

    def kubernetes(self, **settings: Any) -> dict[str, Any]:
        """``infercrane:kubernetes`` for this namespace, as the provider identity."""
        return {
            "context": self.provider.context,
            "namespace": self.namespace,
            "imageDigest": IMAGE,
        } | settings

    def configure(
        self,
        replicas: list[dict[str, Any]],
        *,
        policy: dict[str, Any] | None = None,
        allow_empty: bool = False,
        **settings: Any,
    ) -> Path:
        """Write the generated project (as every driver runs it) and this test's stack file
        (``allow_empty``: an empty ``replicas`` may delete every replica)."""
        project.write_project(self.project_dir)
        kubernetes = self.kubernetes(**settings)
        config: dict[str, Any] = {
            "infercrane:kubernetes": kubernetes,
            "infercrane:replicas": replicas,
        }
        if policy is not None:
            config["infercrane:policy"] = policy
        if allow_empty:
            config[ALLOW_EMPTY_KEY] = True
        self.stack_file.write_text(yaml.safe_dump({"config": config}))
        return self.stack_file

    def by_hand_project(self, directory: Path) -> Path:
        """A person's project in ``directory`` for this test's stack: a copy of the repository's
        ``Pulumi.yaml`` (its virtualenv: this one) and ``__main__.py``, with the test's stack
        file, for a raw ``pulumi`` run there."""
        (directory / STACK_CONFIG_DIR).mkdir(parents=True, exist_ok=True)
        settings = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
        settings["runtime"]["options"]["virtualenv"] = sys.prefix
        (directory / "Pulumi.yaml").write_text(yaml.safe_dump(settings))
        (directory / "__main__.py").write_text((ROOT / "__main__.py").read_text())
        stack_file(directory, self.stack_name).write_text(self.stack_file.read_text())
        return directory

    def namespace_stack(
        self,
        workspace: Path,
        *,
        namespace: str = "",
        stack_name: str = "",
        env: automation.PulumiEnvironment | None = None,
        **settings: Any,
    ) -> NamespaceStack:
        """The control plane's stack for ``namespace`` (default: the test's), as the provider
        (``env``: default, this harness's)."""
        kubernetes = self.kubernetes(**settings) | ({"namespace": namespace} if namespace else {})
        return NamespaceStack(
            KubernetesSettings.model_validate(kubernetes),
            env or self.env,
            workspace,
            stack_name=stack_name or self.stack_name,
        )

    def cli_up(
        self, env: dict[str, str], *, wrapper: Sequence[str] = ()
    ) -> subprocess.CompletedProcess[str]:
        """``infercrane-pulumi up --json`` of this test's stack, as ``cli`` runs it."""
        stack, project = self.stack_name, str(self.project_dir)
        up = ("up", "--stack", stack, "--project-dir", project, "--json")
        return self.cli(*up, env=env, wrapper=wrapper)

    def cli(
        self, *args: str, env: dict[str, str] | None = None, wrapper: Sequence[str] = ()
    ) -> subprocess.CompletedProcess[str]:
        """``infercrane-pulumi <args>`` in a fresh process (default: as the provider identity),
        run under ``wrapper`` (a command that runs the rest: ``test_in_cluster``'s Pod)."""
        return subprocess.run(
            [*wrapper, sys.executable, "-m", "infercrane_pulumi", *args],
            env=env or self.process_env(),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def process_env(self) -> dict[str, str]:
        """The environment of a person's process acting as the provider: its kubeconfig, and
        none of the provider's ``PULUMI_K8S_*`` settings (``make test`` exports decoys of them
        for the drivers, which must never pass them on)."""
        person = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_K8S_")}
        return person | {"KUBECONFIG": str(self.provider.kubeconfig)}

    def stack(self, env: automation.PulumiEnvironment | None = None) -> auto.Stack:
        return automation.open_stack(
            self.stack_name, project_dir=self.project_dir, env=env or self.env
        )

    def _run(
        self,
        operation: automation.Operation,
        env: automation.PulumiEnvironment | None = None,
        *,
        on_event: Callable[[auto.EngineEvent], object] | None = None,
    ) -> automation.StackResult:
        """The stack file through the one run path, exactly as ``infercrane-pulumi`` runs it."""
        options = automation.RunOptions(on_output=self.log.append, on_event=on_event)
        return automation.run_stack_file(
            self.stack_file, env or self.env, operation, options=options
        )

    def preview(self) -> automation.StackResult:
        return self._run("preview")

    def up(
        self,
        env: automation.PulumiEnvironment | None = None,
        *,
        on_event: Callable[[auto.EngineEvent], object] | None = None,
    ) -> automation.StackResult:
        return self._run("up", env, on_event=on_event)

    def destroy(self) -> automation.StackResult:
        return self._run("destroy")

    # -- reading back, as admin -----------------------------------------------------------

    def get(self, kind: Kind, key_or_name: str) -> dict[str, Any] | None:
        name = (
            key_or_name
            if key_or_name.startswith("infercrane-") or "/" in key_or_name
            else naming.object_name(key_or_name)
        )
        return self.admin.get(kind, self.namespace, name)

    def owned(self, kind: Kind) -> list[dict[str, Any]]:
        return self.admin.select(kind, self.namespace, naming.OWNED_SELECTOR)

    def resource_versions(self) -> dict[str, str]:
        return {
            f"{kind.kind}/{item['metadata']['name']}": item["metadata"]["resourceVersion"]
            for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
            for item in self.admin.select(kind, self.namespace, "")
        }

    def written(self) -> dict[str, tuple[int | None, list[Any]]]:
        """Each owned object's generation and what our field manager last wrote to it: what a
        run changes. Unlike ``resource_versions``, the controllers' own writes (status, the
        Deployment's revision annotation) leave it alone, so it can be read while they still
        catch up."""
        return {
            f"{kind.kind}/{item['metadata']['name']}": (
                item["metadata"].get("generation"),
                [
                    entry
                    for entry in item["metadata"].get("managedFields", [])
                    if entry.get("manager") == naming.FIELD_MANAGER
                ],
            )
            for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
            for item in self.admin.select(kind, self.namespace, "")
        }

    def settled(self, key: str) -> dict[str, Any]:
        """Wait until the Deployment controller has written its status for our Deployment."""

        def observed() -> dict[str, Any] | None:
            live = self.get(kinds.DEPLOYMENT, key)
            status = (live or {}).get("status") or {}
            conditions = {c["type"] for c in status.get("conditions", [])}
            generation = (live or {}).get("metadata", {}).get("generation")
            if status.get("observedGeneration") == generation and "Progressing" in conditions:
                return live
            return None

        return wait_for(observed, timeout=60, what=f"Deployment status of {key}")

    def stored_files(self) -> list[Path]:
        """Every file Pulumi wrote for this run: state, backups, history, and its logs."""
        assert self.env.state_dir is not None
        found = [*self.env.state_dir.rglob("*"), *self.env.pulumi_home.rglob("*.log*")]
        return [path for path in found if path.is_file()]

    def assert_backend_holds_no(self, secret: str) -> None:
        """No file of the whole backend directory (state, `.bak` backups,
        `history/**/*.history.json`, locks) nor of Pulumi's logs holds ``secret``."""
        leaking = [path for path in self.stored_files() if secret.encode() in path.read_bytes()]
        assert leaking == [], f"the credential is stored in plain text in {leaking}"

    def text(self) -> str:
        return "".join(self.log)


def managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])}


def fields_of(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    [entry] = [e for e in obj["metadata"]["managedFields"] if e["manager"] == manager]
    fields: dict[str, Any] = entry["fieldsV1"]
    return fields


def unowned(desired: Any, fields: dict[str, Any], path: str = "") -> list[str]:
    """Paths of ``desired`` that ``fields`` (a managedFields fieldsV1) does not own."""
    missing: list[str] = []
    for key, value in desired.items():
        if key in ("apiVersion", "kind") or f"{path}.{key}" in (
            ".metadata.name",
            ".metadata.namespace",
        ):
            continue
        owned = fields.get(f"f:{key}")
        where = f"{path}.{key}"
        if owned is None:
            missing.append(where)
        elif isinstance(value, dict) and owned:  # an empty set owns an atomic map whole
            missing += unowned(value, owned, where)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            keyed = {k: v for k, v in owned.items() if k.startswith("k:")}
            for item in value:
                match = next(
                    (
                        sub
                        for k, sub in keyed.items()
                        if all(item.get(a) == b for a, b in json.loads(k[2:]).items())
                    ),
                    None,
                )
                if keyed and match is None:
                    missing.append(f"{where}[{item.get('name', '?')}]")
                elif match is not None:
                    missing += unowned(item, match, f"{where}[{item.get('name', '?')}]")
    return missing

"""NamespaceStack's own decisions: validation before anything is written, the stack file it
writes (any number of intents, the encryption salt and an encrypted kubeconfig kept), and
``ensure_many``'s promise of an outcome for every namespace, whatever one of them raises."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from infercrane_pulumi.automation import NamespaceStack, PulumiEnvironment, engine, results
from infercrane_pulumi.automation.namespaces import NamespaceOutcome, ensure_many
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import (
    ClusterForbiddenError,
    ClusterUnavailableError,
    ConfigError,
    InternalError,
)
from tests.unit import samples


class _RecordingStack:
    """Stands in for ``auto.Stack``: records the secrets that would go through the Pulumi
    CLI's stdin (``engine.set_secret``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.secrets: list[tuple[str, str]] = []
        self.workspace = SimpleNamespace(pulumi_command=None, work_dir="ws", env_vars={})

        def set_secret(_: Any, *, stack: str, path: str, value: str, **__: Any) -> None:
            assert stack == "s1"
            self.secrets.append((path, value))

        monkeypatch.setattr(engine, "set_secret", set_secret)


def namespace_stack(tmp_path: Path, **settings: Any) -> NamespaceStack:
    env = PulumiEnvironment(
        state_dir=tmp_path / "state",
        pulumi_home=tmp_path,
        passphrase="p",
        kubeconfig=tmp_path / "kubeconfig",  # the driver's: a stack may name none
    )
    parsed = KubernetesSettings.model_validate(samples.kubernetes(**settings))
    return NamespaceStack(parsed, env, tmp_path / "ws", stack_name="s1")


def intents(n: int) -> list[ReplicaIntent]:
    return list(
        parse_stack_config(
            samples.kubernetes(), [samples.replica(externalKey=f"k-{i}") for i in range(n)]
        ).replicas
    )


def stack_file(tmp_path: Path) -> Path:
    path = tmp_path / "ws" / "stacks" / "Pulumi.s1.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_a_thousand_intents_are_written_whole_and_the_salt_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = namespace_stack(tmp_path)
    stack_file(tmp_path).write_text("encryptionsalt: v1:salt\n")
    pulumi = _RecordingStack(monkeypatch)
    wanted = intents(1000)
    stack._write(pulumi, stack.config(wanted))  # type: ignore[arg-type]
    written = yaml.safe_load(stack_file(tmp_path).read_text())
    assert written["encryptionsalt"] == "v1:salt"
    assert parse_stack_config(
        written["config"]["infercrane:kubernetes"], written["config"]["infercrane:replicas"]
    ).replicas == tuple(wanted)
    assert pulumi.secrets == []  # no kubeconfig, nothing through the CLI


def test_kubeconfig_contents_go_through_pulumi_once_and_stay_encrypted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = namespace_stack(tmp_path, kubeconfig=samples.KUBECONFIG_CONTENTS)
    pulumi = _RecordingStack(monkeypatch)
    stack._write(pulumi, stack.config(intents(1)))  # type: ignore[arg-type]
    assert pulumi.secrets == [("infercrane:kubernetes.kubeconfig", samples.KUBECONFIG_CONTENTS)]
    # What `pulumi config set --secret --path` leaves in the file, kept by the next write.
    path = stack_file(tmp_path)
    document = yaml.safe_load(path.read_text())
    document["config"]["infercrane:kubernetes"]["kubeconfig"] = {"secure": "v1:cipher"}
    path.write_text(yaml.safe_dump(document))
    stack._write(pulumi, stack.config(intents(2)))  # type: ignore[arg-type]
    written = yaml.safe_load(path.read_text())["config"]["infercrane:kubernetes"]
    assert written["kubeconfig"] == {"secure": "v1:cipher"}
    assert len(pulumi.secrets) == 1
    assert "client-key-data" not in path.read_text()


def test_invalid_intents_are_refused_before_the_workspace_exists(tmp_path: Path) -> None:
    stack = namespace_stack(tmp_path)
    with pytest.raises(ConfigError):
        stack.ensure([*intents(1), *intents(1)])
    assert not (tmp_path / "ws").exists()


def ensured(namespace: str) -> results.StackResult:
    return results.StackResult("up", "infercrane", namespace, (), namespace=namespace)


def seen(outcome: NamespaceOutcome) -> object:
    """An outcome as one whole value: its result, or its error's class, code, retryable, line."""
    error = outcome.error
    if error is None:
        return outcome.result
    return outcome.result, type(error), error.code, error.retryable, str(error)


UNAVAILABLE = ClusterUnavailableError("cannot reach the API server (MaxRetryError)")
FORBIDDEN = ClusterForbiddenError('Deployment/team-c/x: deployments.apps "x" is forbidden')
BUG_IN_A = (
    None,
    InternalError,
    "internal-error",
    False,
    "namespace team-a: unexpected RuntimeError; please report it",
)


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (
            {"team-a": RuntimeError("token s3cr3t"), "team-b": None},
            {"team-a": BUG_IN_A, "team-b": ensured("team-b")},
        ),
        (
            {"team-a": RuntimeError("token s3cr3t"), "team-b": UNAVAILABLE, "team-c": FORBIDDEN},
            {
                "team-a": BUG_IN_A,
                "team-b": (
                    None,
                    ClusterUnavailableError,
                    "cluster-unavailable",
                    True,
                    "cannot reach the API server (MaxRetryError)",
                ),
                "team-c": (
                    None,
                    ClusterForbiddenError,
                    "cluster-forbidden",
                    False,
                    'Deployment/team-c/x: deployments.apps "x" is forbidden',
                ),
            },
        ),
    ],
    ids=["bug-and-success", "bug-and-typed-failures"],
)
def test_every_namespace_gets_its_outcome_whatever_another_raises(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    raised: dict[str, Exception | None],
    expected: dict[str, object],
) -> None:
    requests = {}
    for namespace, error in raised.items():
        stack = namespace_stack(tmp_path / namespace)

        def ensure(_: object, namespace: str = namespace, error: Exception | None = error) -> Any:
            if error is not None:
                raise error
            return ensured(namespace)

        monkeypatch.setattr(stack, "ensure", ensure)
        requests[namespace] = (stack, intents(1))
    outcomes = ensure_many(requests, parallel=2)
    assert {namespace: seen(outcome) for namespace, outcome in outcomes.items()} == expected
    bug = outcomes["team-a"].error
    assert bug is not None and bug.__cause__ is raised["team-a"]  # kept for a traceback


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit])
def test_an_interruption_still_ends_ensure_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interruption: type[BaseException]
) -> None:
    stack = namespace_stack(tmp_path)

    def ensure(_: object) -> Any:
        raise interruption

    monkeypatch.setattr(stack, "ensure", ensure)
    with pytest.raises(interruption):
        ensure_many({"team-a": (stack, intents(1))})

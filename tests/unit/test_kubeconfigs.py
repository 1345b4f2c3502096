"""Which kubeconfig a run reaches its cluster with, and which API server that names."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from pathlib import Path

import pytest
import yaml

from infercrane_pulumi.automation import NamespaceStack, PulumiEnvironment, engine
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.config.kubeconfigs import ClusterIdentity
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.hand_run import unforced
from tests.unit import samples

CA = b"-----BEGIN CERTIFICATE-----\nthe cluster's CA\n-----END CERTIFICATE-----\n"


def settings(**overrides: object) -> KubernetesSettings:
    return parse_stack_config(samples.kubernetes(**overrides), []).kubernetes


def kubeconfig(server: str, ca: dict[str, str], context: str = "kind-infercrane") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server} | ca}],
            "users": [{"name": "u", "user": {"token": "secret-token"}}],
            "contexts": [
                {"name": "other", "context": {"cluster": "missing", "user": "u"}},
                {"name": context, "context": {"cluster": "c", "user": "u"}},
            ],
            "current-context": "other",
        }
    )


@pytest.mark.parametrize(
    ("own", "fallback", "expected"),
    [
        ("/stack/kubeconfig", "/driver/kubeconfig", "/stack/kubeconfig"),
        (None, "/driver/kubeconfig", "/driver/kubeconfig"),
        (None, Path("/driver/kubeconfig"), "/driver/kubeconfig"),
        (samples.KUBECONFIG_CONTENTS, "/driver/kubeconfig", samples.KUBECONFIG_CONTENTS),
        ("/stack/kubeconfig", "/a:/b", "/stack/kubeconfig"),  # the list is never used
    ],
)
def test_the_stack_kubeconfig_wins_else_the_driver_gives_one(
    own: str | None, fallback: str | Path, expected: str
) -> None:
    given = settings() if own is None else settings(kubeconfig=own)
    assert kubeconfigs.resolved(given, fallback) == given.model_copy(
        update={"kubeconfig": expected}
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("kc.yaml", "/caller/kc.yaml"),
        ("./nested/../kc.yaml", "/caller/nested/../kc.yaml"),  # as given: no symlink guessed
        ("/etc/kc.yaml", "/etc/kc.yaml"),
        ("~/kc.yaml", "/home/u/kc.yaml"),
        (samples.KUBECONFIG_CONTENTS, samples.KUBECONFIG_CONTENTS),
    ],
)
def test_a_kubeconfig_path_is_anchored_and_its_contents_are_not(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    assert kubeconfigs.anchored(value, Path("/caller")) == expected


@pytest.mark.parametrize(
    ("own", "fallback"),
    [("kc.yaml", "/driver/kubeconfig"), (None, "kc.yaml"), (None, Path("kc.yaml"))],
)
def test_a_relative_kubeconfig_resolves_to_the_file_in_the_resolving_process_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own: str | None, fallback: str | Path
) -> None:
    monkeypatch.chdir(tmp_path)
    given = settings() if own is None else settings(kubeconfig=own)
    assert kubeconfigs.resolved(given, fallback).kubeconfig == str(tmp_path / "kc.yaml")


def test_a_driver_kubeconfig_is_the_one_where_its_caller_constructed_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the caller named stays named after it (or a thread of its process) moves: the
    environment's kubeconfig and the stack's own are anchored when constructed."""
    caller, later = tmp_path / "caller", tmp_path / "later"
    caller.mkdir()
    later.mkdir()
    monkeypatch.chdir(caller)
    env = PulumiEnvironment(
        state_dir=tmp_path / "state", pulumi_home=tmp_path, passphrase="p", kubeconfig=Path("kc")
    )
    listed = dataclasses.replace(env, kubeconfig=Path("a:b"))
    stack = NamespaceStack(settings(kubeconfig="own/kc"), env, tmp_path / "ws")
    monkeypatch.chdir(later)
    assert env.kubeconfig == caller / "kc"
    assert stack.settings.kubeconfig == str(caller / "own" / "kc")
    assert kubeconfigs.resolved(settings(), env.kubeconfig).kubeconfig == str(caller / "kc")
    assert listed.kubeconfig == Path("a:b")  # refused where it is used, as given
    with pytest.raises(ConfigError):
        kubeconfigs.resolved(settings(), listed.kubeconfig)


def test_a_namespace_stack_with_no_cluster_to_reach_is_refused_when_constructed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No kubeconfig anywhere, or ``in-cluster`` outside a Pod: one line before any stack is
    opened or any file written."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    mount = tmp_path / "no-pod"
    monkeypatch.setattr(kubeconfigs, "SERVICE_ACCOUNT_DIR", mount)
    env = PulumiEnvironment(state_dir=tmp_path / "state", pulumi_home=tmp_path, passphrase="p")
    expected = {
        "kind-infercrane": "infercrane:kubernetes.kubeconfig: no kubeconfig for context "
        "'kind-infercrane': set it, or give the driver's kubeconfig "
        "(PulumiEnvironment.kubeconfig, or $KUBECONFIG)",
        "in-cluster": "infercrane:kubernetes.context: 'in-cluster' is the ServiceAccount of the "
        "Pod this runs in, and this process is not in one (missing: KUBERNETES_SERVICE_HOST, "
        f"KUBERNETES_SERVICE_PORT, {mount}/token, {mount}/ca.crt)",
    }
    for context, problem in expected.items():
        with pytest.raises(ConfigError) as refused:
            NamespaceStack(settings(context=context), env, tmp_path / "ws")
        assert refused.value.problems == (problem,)
    assert not (tmp_path / "ws").exists() and not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    ("fallback", "problem"),
    [
        (
            None,
            "infercrane:kubernetes.kubeconfig: no kubeconfig for context 'kind-infercrane': set "
            "it, or give the driver's kubeconfig (PulumiEnvironment.kubeconfig, or $KUBECONFIG)",
        ),
        (
            "/a:/b",
            "infercrane:kubernetes.kubeconfig: the driver's kubeconfig (PulumiEnvironment."
            "kubeconfig, or $KUBECONFIG) names several files (/a:/b); name one, or set "
            "infercrane:kubernetes.kubeconfig",
        ),
    ],
)
def test_no_kubeconfig_or_a_list_of_them_is_one_line_refusal(
    fallback: str | None, problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        kubeconfigs.resolved(settings(), fallback)
    assert refused.value.problems == (problem,)
    assert not refused.value.retryable


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"KUBECONFIG": "/k", "HOME": "/home/u"}, Path("/k")),
        ({"KUBECONFIG": "", "HOME": "/home/u"}, Path("/home/u/.kube/config")),
        ({"HOME": "/home/u"}, Path("/home/u/.kube/config")),
    ],
)
def test_a_process_environment_names_its_kubeconfig_as_kubectl_reads_it(
    environ: dict[str, str], expected: Path
) -> None:
    assert kubeconfigs.from_environment(environ) == expected


def test_the_identity_is_the_context_server_and_the_digest_of_its_ca(tmp_path: Path) -> None:
    expected = ClusterIdentity("https://10.0.0.1:6443", hashlib.sha256(CA).hexdigest())
    data = {"certificate-authority-data": base64.b64encode(CA).decode()}
    contents = kubeconfig("https://10.0.0.1:6443/", data)
    assert kubeconfigs.identity(settings(kubeconfig=contents)) == expected
    # A file, its CA a path relative to the file, as kubectl and the provider read it.
    (tmp_path / "ca.crt").write_bytes(CA)
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig("https://10.0.0.1:6443", {"certificate-authority": "ca.crt"}))
    assert kubeconfigs.identity(settings(kubeconfig=str(path))) == expected
    system = kubeconfigs.identity(settings(kubeconfig=kubeconfig("https://10.0.0.1:6443", {})))
    assert system == ClusterIdentity("https://10.0.0.1:6443", None)
    assert str(system) == "https://10.0.0.1:6443 (CA system CAs)"


@pytest.fixture
def pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A Pod's ServiceAccount mount: its token and the cluster's CA."""
    (tmp_path / "token").write_text("the-projected-token")
    (tmp_path / "ca.crt").write_bytes(CA)
    monkeypatch.setattr(kubeconfigs, "SERVICE_ACCOUNT_DIR", tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("host", "server"),
    [("10.96.0.1", "https://10.96.0.1:443"), ("fd00:10:96::1", "https://[fd00:10:96::1]:443")],
)
def test_in_cluster_is_the_pods_service_account_read_from_its_mount_and_never_a_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, pod: Path, host: str, server: str
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", "/decoy")
    given = settings(context="in-cluster")
    resolved = kubeconfigs.resolved(given, "/driver/kubeconfig")
    assert resolved.kubeconfig is not None
    assert yaml.safe_load(resolved.kubeconfig) == {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "in-cluster",
                "cluster": {"server": server, "certificate-authority": str(pod / "ca.crt")},
            }
        ],
        # The file, read again by each client: the kubelet rotates it in place.
        "users": [{"name": "in-cluster", "user": {"tokenFile": str(pod / "token")}}],
        "contexts": [
            {"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "in-cluster"}}
        ],
    }
    assert resolved == given.model_copy(update={"kubeconfig": resolved.kubeconfig})
    assert "the-projected-token" not in resolved.kubeconfig
    expected = ClusterIdentity(server, hashlib.sha256(CA).hexdigest())
    assert kubeconfigs.identity(resolved) == expected


@pytest.mark.parametrize(
    ("environ", "removed", "missing"),
    [
        ({}, (), "KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT"),
        (
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "https"},
            (),
            "KUBERNETES_SERVICE_PORT",
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            ("token",),
            "{pod}/token",
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            ("token", "ca.crt"),
            "{pod}/token, {pod}/ca.crt",
        ),
    ],
)
def test_in_cluster_outside_a_pod_is_one_line_naming_what_is_missing(
    pod: Path, environ: dict[str, str], removed: tuple[str, ...], missing: str
) -> None:
    for name in removed:
        (pod / name).unlink()
    with pytest.raises(ConfigError) as refused:
        kubeconfigs.in_cluster(environ)
    assert refused.value.problems == (
        "infercrane:kubernetes.context: 'in-cluster' is the ServiceAccount of the Pod this "
        f"runs in, and this process is not in one (missing: {missing.format(pod=pod)})",
    )
    assert not refused.value.retryable


def test_in_cluster_beside_a_kubeconfig_is_refused_as_configuration() -> None:
    with pytest.raises(ConfigError) as refused:
        settings(context="in-cluster", kubeconfig="/etc/kc.yaml")
    assert refused.value.problems == (
        "infercrane:kubernetes: context 'in-cluster' is the Pod's own ServiceAccount and reads "
        "no kubeconfig: unset kubeconfig, or name another context",
    )


def test_the_identity_never_carries_credentials_from_the_server_url() -> None:
    found = kubeconfigs.identity(
        settings(kubeconfig=kubeconfig("https://admin:hunter2@10.0.0.1:6443", {}))
    )
    assert found.server == "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        ("absent", "infercrane:kubernetes.context: the kubeconfig has no context named 'absent'"),
        ("other", "infercrane:kubernetes.context: the kubeconfig has no cluster named 'missing'"),
    ],
)
def test_a_context_that_names_no_server_is_refused_in_one_line(context: str, problem: str) -> None:
    contents = kubeconfig("https://10.0.0.1:6443", {})
    with pytest.raises(ConfigError) as refused:
        # Validated for its context by the config rules; checked again when read here.
        kubeconfigs.identity(settings(kubeconfig=contents).model_copy(update={"context": context}))
    assert refused.value.problems == (problem,)


def test_an_unreadable_kubeconfig_file_is_refused_without_its_contents(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        kubeconfigs.identity(settings(kubeconfig=str(tmp_path / "absent")))
    assert refused.value.problems == (
        "infercrane:kubernetes.context: cannot read the API server of context "
        "'kind-infercrane' from the kubeconfig (FileNotFoundError)",
    )


def test_the_engine_inherits_neither_how_the_provider_applies_nor_the_lease_password() -> None:
    ambient = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "HTTPS_PROXY": "http://proxy:3128",
        "KUBECONFIG": "/control-plane/kubeconfig",
        "PULUMI_K8S_ENABLE_PATCH_FORCE": "true",
        "PULUMI_K8S_DELETE_UNREACHABLE": "true",
        "PULUMI_HOME": "/ambient",
        "INFERCRANE_LEASE_URL": "postgres://lease:Xy9kq@db:5432/leases",
        "PGPASSWORD": "the state's, which the engine's backend driver reads",
    }
    assert engine.inherited(ambient) == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "HTTPS_PROXY": "http://proxy:3128",
        "PULUMI_HOME": "/ambient",  # the run's own variables replace it (environment.py)
        "PGPASSWORD": "the state's, which the engine's backend driver reads",
    }


@pytest.mark.parametrize("value", ["false", "", "1"])
def test_a_person_pulumi_up_runs_unless_its_environment_forces_applies(value: str) -> None:
    unforced({"PULUMI_K8S_ENABLE_PATCH_FORCE": value})
    with pytest.raises(ConfigError) as refused:
        unforced({"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"})
    assert refused.value.problems == (
        "PULUMI_K8S_ENABLE_PATCH_FORCE=true makes pulumi-kubernetes force its applies over "
        "other field managers, which InferCrane never does: unset it",
    )


def test_a_drivers_kubeconfig_contents_are_used_as_given_and_never_quoted() -> None:
    """Contents hold ':' on every line: they were once refused as a list of files, the refusal
    quoting them whole, key data included."""
    given = kubeconfigs.resolved(settings(), samples.KUBECONFIG_CONTENTS)
    assert given.kubeconfig == samples.KUBECONFIG_CONTENTS
    with pytest.raises(ConfigError) as refused:
        kubeconfigs.resolved(settings(), "/a/config:/b/config")
    assert "/a/config:/b/config" in refused.value.problems[0]

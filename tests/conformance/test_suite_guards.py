"""The suite's own promises to whoever points it at a cluster: it refuses a missing or non-admin
context in one line having created nothing, and it only ever removes what its own run made."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from kubernetes import client

from tests.conformance import preflight
from tests.conformance.backends import Tenant
from tests.conformance.harness import ROOT
from tests.conformance.ledger import RunLedger
from tests.conformance.target import (
    CONTEXT_ENV,
    INSTALL_KSERVE_CRD_ENV,
    KUBECONFIG_ENV,
    ExternalTarget,
    TargetError,
    target_from_env,
)

pytestmark = pytest.mark.conformance


def namespaces(admin: client.ApiClient) -> set[str]:
    listed = client.CoreV1Api(admin).list_namespace().items
    return {str(ns.metadata.name) for ns in listed if ns.metadata is not None}


# Under `make conformance CONTEXT=…` a nested make would inherit CONTEXT through MAKEFLAGS.
INHERITED = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CONTEXT", "KSERVE_CRD")


def suite_env(**variables: str) -> dict[str, str]:
    """This environment without any target of its own, plus ``variables``."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("INFERCRANE_CONFORMANCE_") and k not in INHERITED
    }
    return clean | variables


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def run_suite(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/conformance"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_target_is_read_from_the_environment() -> None:
    assert target_from_env({}) is None
    assert target_from_env({CONTEXT_ENV: "kind-x", "KUBECONFIG": "/k"}) == ExternalTarget(
        context="kind-x", kubeconfig="/k", install_kserve_crd=False, gpu_workload=None
    )
    for refused, says in (
        ({KUBECONFIG_ENV: "/k"}, f"{CONTEXT_ENV} (CONTEXT=<admin context>) is required"),
        ({CONTEXT_ENV: "x", INSTALL_KSERVE_CRD_ENV: "yes"}, "must be 'install' or empty"),
    ):
        with pytest.raises(TargetError, match=re.escape(says)):
            target_from_env(refused)


def test_preflight_passes_the_admin_and_names_what_the_provider_lacks(
    admin_client: client.ApiClient, provider_client: client.ApiClient, tenant: Tenant
) -> None:
    everything = preflight.needed(install_kserve_crd=True)
    assert preflight.missing(admin_client, everything) == []
    # In its own namespace the provider holds what the shipped Deployment-mode Role grants,
    # and nothing the suite needs besides.
    lacking = preflight.missing(provider_client, everything, tenant.namespace)
    granted = set(everything) - set(lacking)
    assert {(p.verb, p.resource) for p in granted} == {
        (verb, resource)
        for verb in ("get", "list", "create", "patch", "delete")
        for resource in ("deployments", "services")
    }
    assert "create namespaces cluster-wide" in [str(p) for p in lacking]


def test_a_missing_context_is_one_line_and_creates_nothing(
    admin_client: client.ApiClient, tenant: Tenant
) -> None:
    before = namespaces(admin_client)
    kubeconfig = str(tenant.provider.kubeconfig)
    made = subprocess.run(
        ["make", "conformance", f"KUBECONFIG={kubeconfig}"],
        cwd=ROOT,
        env=suite_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert made.returncode == 2, made.stdout + made.stderr
    assert (made.stdout, len(made.stderr.splitlines())) == ("", 1), made.stderr
    assert "CONTEXT=<admin context> is required" in made.stderr

    direct = run_suite(suite_env(**{KUBECONFIG_ENV: kubeconfig}))
    assert direct.returncode == pytest.ExitCode.USAGE_ERROR, direct.stdout + direct.stderr
    [line] = lines(direct.stderr)
    assert line.startswith(f"ERROR: conformance: {CONTEXT_ENV} (CONTEXT=<admin context>) is")
    assert namespaces(admin_client) - before == set()


def test_a_non_admin_context_is_refused_in_one_line_and_nothing_is_created(
    admin_client: client.ApiClient, tenant: Tenant
) -> None:
    before = namespaces(admin_client)
    refused = run_suite(
        suite_env(
            **{
                KUBECONFIG_ENV: str(tenant.provider.kubeconfig),
                CONTEXT_ENV: tenant.provider.context,
            }
        )
    )
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout + refused.stderr
    [line] = lines(refused.stderr)
    assert line.startswith(
        f"ERROR: conformance: context {tenant.provider.context!r} is not an admin of this "
        "cluster, nothing was created; it may not: create namespaces cluster-wide; "
    )
    assert namespaces(admin_client) - before == set()


def test_another_runs_namespace_is_never_touched(admin_client: client.ApiClient) -> None:
    interrupted = RunLedger(admin_client)  # as if a run died before its sweep
    current = RunLedger(admin_client)
    theirs = interrupted.create_namespace()
    try:
        ours = current.create_namespace()
        with pytest.raises(AssertionError, match="not of run"):
            current.delete_namespace(theirs)
        current.sweep(timeout=120)
        current.verify_clean()
        core = client.CoreV1Api(admin_client)
        assert ours not in namespaces(admin_client)
        kept = core.read_namespace(theirs)
        assert kept.metadata is not None and kept.metadata.deletion_timestamp is None
        assert kept.status is not None and kept.status.phase == "Active"
    finally:
        interrupted.sweep(timeout=120)
    interrupted.verify_clean()

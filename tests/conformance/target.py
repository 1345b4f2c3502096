"""Which cluster the conformance suite runs against, read once from the environment.

Nothing set (``make test``): the suite starts its own local control plane. ``make conformance``
sets the variables below to run the same tests against an existing cluster as its admin. They
are read before any cluster is touched, so a bad combination costs one line and creates nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from infercrane_pulumi.config.intents import Workload
from infercrane_pulumi.config.podsettings import Resources

KUBECONFIG_ENV = "INFERCRANE_CONFORMANCE_KUBECONFIG"
CONTEXT_ENV = "INFERCRANE_CONFORMANCE_CONTEXT"
INSTALL_KSERVE_CRD_ENV = "INFERCRANE_CONFORMANCE_INSTALL_KSERVE_CRD"
# A real kubelet cannot pull the suite's placeholder runtime image, so a GPU scenario on a
# real GPU node needs a runnable portable workload (the intent's `workload`, as JSON).
GPU_WORKLOAD_ENV = "INFERCRANE_CONFORMANCE_GPU_WORKLOAD"
# And what one replica of it asks of such a node (the settings' `resources`, as JSON), where
# the defaults, sized for a real vLLM, are not what it needs.
GPU_RESOURCES_ENV = "INFERCRANE_CONFORMANCE_GPU_RESOURCES"
USAGE = "make conformance KUBECONFIG=<file> CONTEXT=<admin context> [KSERVE_CRD=install]"


class TargetError(ValueError):
    """The environment names no usable target; the message is one line."""


@dataclass(frozen=True)
class ExternalTarget:
    """An existing cluster, reached through a named admin context (never the current one)."""

    context: str
    kubeconfig: str  # a file or a KUBECONFIG-style list, as kubectl reads it
    install_kserve_crd: bool
    gpu_workload: Mapping[str, Any] | None
    gpu_resources: Mapping[str, Any] | None = None


def default_kubeconfig(environ: Mapping[str, str]) -> str:
    """What kubectl would read: $KUBECONFIG, else ~/.kube/config."""
    return environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def target_from_env(environ: Mapping[str, str] = os.environ) -> ExternalTarget | None:
    """The external cluster the environment names, or None for the suite's own local one."""
    names = (
        KUBECONFIG_ENV,
        CONTEXT_ENV,
        INSTALL_KSERVE_CRD_ENV,
        GPU_WORKLOAD_ENV,
        GPU_RESOURCES_ENV,
    )
    values = {name: environ.get(name, "").strip() for name in names}
    if not any(values.values()):
        return None
    if not values[CONTEXT_ENV]:
        given = ", ".join(name for name, value in values.items() if value)
        raise TargetError(
            f"{CONTEXT_ENV} (CONTEXT=<admin context>) is required with {given}; the suite "
            f"never acts as a kubeconfig's current context. Usage: {USAGE}"
        )
    install = values[INSTALL_KSERVE_CRD_ENV]
    if install not in ("", "install"):
        raise TargetError(f"{INSTALL_KSERVE_CRD_ENV} must be 'install' or empty, got {install!r}")
    return ExternalTarget(
        context=values[CONTEXT_ENV],
        kubeconfig=values[KUBECONFIG_ENV] or default_kubeconfig(environ),
        install_kserve_crd=install == "install",
        gpu_workload=_workload(values[GPU_WORKLOAD_ENV]),
        gpu_resources=_resources(values[GPU_RESOURCES_ENV]),
    )


def _workload(text: str) -> Mapping[str, Any] | None:
    """The portable workload in the intent's own JSON form, validated by the product's model."""
    return _validated(GPU_WORKLOAD_ENV, text, Workload)


def _resources(text: str) -> Mapping[str, Any] | None:
    """What one replica asks of a node, in the settings' own JSON form, validated likewise."""
    return _validated(GPU_RESOURCES_ENV, text, Resources)


def _validated(name: str, text: str, model: type[BaseModel]) -> Mapping[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
        model.model_validate(value)
    except ValidationError as error:  # before ValueError, its base
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "value"
        raise TargetError(f"{name}: {where}: {problem['msg']}") from None
    except ValueError as error:
        raise TargetError(f"{name} is not JSON: {error}") from None
    validated: Mapping[str, Any] = value
    return validated

"""The program as a person's ``pulumi up`` runs it (the repository's ``__main__.py``): its own
ownership preflight against the configured cluster, its own deletions by uid as the engine
deletes a key's component, and an environment that would force applies refused. A driver that
serves the program judges it itself (``automation``) and takes ``ownership_preflight`` from here
only for a configuration other than the one it checked. Above ``cluster``, which it calls;
``program`` stays below it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pulumi

from infercrane_pulumi.cluster import client, ownership
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.program.program import (
    build_program,
    judged,
    load_host_config,
    stack_identity,
)

# pulumi-kubernetes reads it from its own environment and forces every apply when "true".
PATCH_FORCE = "PULUMI_K8S_ENABLE_PATCH_FORCE"


def main(environ: Mapping[str, str] = os.environ) -> None:
    """The program as ``pulumi up`` runs it: preflight against the configured cluster, through
    the kubeconfig the stack names, else the one ``pulumi``'s own environment names, as kubectl
    reads it."""
    given = load_host_config(environ)

    def preflight(rendered: workloads.Rendered) -> None:
        unforced(environ)
        ownership_preflight(rendered)

    build_program(
        judged(preflight),
        kubeconfig=kubeconfigs.from_environment(environ),
        on_delete=delete_objects,
        given=given,
    )()


def unforced(environ: Mapping[str, str]) -> None:
    """Refuse an environment that lets the provider plugin take over other managers' fields:
    a person's ``pulumi up`` runs the plugin in its own environment (the
    drivers start it without the variable: ``automation.engine.process``)."""
    if environ.get(PATCH_FORCE) == "true":
        raise ConfigError(
            f"{PATCH_FORCE}=true makes pulumi-kubernetes force its applies over other field "
            "managers, which InferCrane never does: unset it"
        )


def ownership_preflight(rendered: workloads.Rendered) -> None:
    """The ownership rule against the configured cluster (``cluster.ownership``); an update
    (not a preview) also deletes what the stack no longer holds. A stack emptied of intents is
    checked too: it still deletes what it applied."""
    settings = rendered.config.kubernetes
    ownership.guard(client.connect(settings), rendered, deleting=not pulumi.runtime.is_dry_run())


def delete_objects(config: StackConfig, key: str) -> None:
    """A person's run, as the engine deletes ``key``'s component: its objects, each exactly
    ours and by the uid just read (``delete_key``)."""
    delete_key(config, key, stack=stack_identity())


def delete_key(config: StackConfig, key: str, *, stack: str) -> None:
    """``key``'s objects that ``stack`` applied, each exactly ours and by the uid just read
    (``cluster.ownership.delete_named``)."""
    emptied = config.model_copy(update={"replicas": ()})
    rendered = workloads.render(emptied, stack=stack)
    ownership.delete_named(client.connect(config.kubernetes), rendered, frozenset({key}))

"""Everything that differs per workload API, in one table, and a stack's objects rendered from it.

One entry per value of ``infercrane:kubernetes.workloadApi``, each filled in by the API's own
module (``deployment``, ``kserve``; the shape of an entry: ``workloadapi``). Every other module,
the policy, ``doctor`` and the dev bootstrap included, asks this table instead of naming a kind
or branching on the API's name, so a new backend is one module and one line here. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infercrane_pulumi.config.intents import (
    KubernetesSettings,
    ReplicaIntent,
    StackConfig,
    WorkloadApiName,
)
from infercrane_pulumi.errors import InternalError
from infercrane_pulumi.objects import deployment, kserve
from infercrane_pulumi.objects.kinds import Kind
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.workloadapi import WorkloadApi

WORKLOAD_APIS: Mapping[WorkloadApiName, WorkloadApi] = {
    api.name: api for api in (deployment.API, kserve.API)
}


# Every kind any workload API owns: what a stack may hold, whichever API it used.
OWNED_KINDS: tuple[Kind, ...] = tuple(
    dict.fromkeys(kind for api in WORKLOAD_APIS.values() for kind in api.kinds)
)
# Each of them by its name (an object's ``kind``).
KINDS: Mapping[str, Kind] = {kind.kind: kind for kind in OWNED_KINDS}


def workload_api(settings: KubernetesSettings) -> WorkloadApi:
    return WORKLOAD_APIS[settings.workload_api]


def of_workload(workload: Mapping[str, object]) -> WorkloadApi:
    """The API whose serving workload ``workload`` is, by its kind (no two APIs serve with
    the same kind)."""
    for api in WORKLOAD_APIS.values():
        if workload.get("kind") == api.workload_kind.kind:
            return api
    # Only an API's serving workload is ever judged: anything else is a bug here, never a
    # workload with no Pod to judge.
    raise InternalError(f"{workload.get('kind')}: the serving workload of no workload API")


def replica_objects(
    settings: KubernetesSettings, intent: ReplicaIntent, *, stack: str | None = None
) -> list[Manifest]:
    return workload_api(settings).objects(settings, intent, stack=stack)


def endpoint(settings: KubernetesSettings, intent: ReplicaIntent) -> str:
    return workload_api(settings).endpoint(settings, intent)


@dataclass(frozen=True)
class Rendered:
    """A stack's objects, rendered once for a run: each key's, as its workload API builds them,
    marked with the identity of the stack applying them (``stack``). The run's policy, its
    verdict over the cluster and the program it serves all take them from here."""

    config: StackConfig
    stack: str | None
    objects: Mapping[str, tuple[Manifest, ...]]  # per external key, in ``kinds`` order
    endpoints: Mapping[str, str]  # per external key, where its objects serve in the cluster

    def all(self) -> list[Manifest]:
        """Every object, sorted by name then kind (the order ``render`` prints)."""
        found = [obj for objects in self.objects.values() for obj in objects]
        return sorted(found, key=lambda obj: (obj["metadata"]["name"], obj["kind"]))


def render(config: StackConfig, *, stack: str | None) -> Rendered:
    """``config``'s objects; ``stack``: the identity of the stack applying them
    (``naming.stack_identity``; None: unmarked, as ``render`` prints them)."""
    settings = config.kubernetes
    api = workload_api(settings)
    return Rendered(
        config,
        stack,
        {
            intent.external_key: tuple(api.objects(settings, intent, stack=stack))
            for intent in config.replicas
        },
        {intent.external_key: api.endpoint(settings, intent) for intent in config.replicas},
    )


def stack_objects(config: StackConfig, *, stack: str | None = None) -> list[Manifest]:
    """Every object of the stack (``render``), sorted by name then kind."""
    return render(config, stack=stack).all()

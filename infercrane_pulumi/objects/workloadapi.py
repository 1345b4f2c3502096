"""What a workload API is to this provider: the shape of one entry of the workload table
(``workloads``). Each API's module (``deployment``, ``kserve``) fills one in: the kinds it owns
(the serving workload first; each kind carries its apiVersion and immutable fields), how an
intent becomes those objects, the endpoint it serves at, the annotations it adds, where the Pod
spec and the replica count sit in its workload, the readiness rule ``observe`` applies, what
``doctor`` checks of its controller, and the shipped RBAC files (under ``deploy/kubernetes``)
that grant the provider those kinds. Pure.

A third API (LeaderWorkerSet, for a replica spread over several nodes, say) is one more module
filling one in (its kinds, builders, locators, readiness rule, Kustomize base) and one line in
the table; nothing else names a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent, WorkloadApiName
from infercrane_pulumi.objects import manifests, readiness
from infercrane_pulumi.objects.kinds import Kind
from infercrane_pulumi.objects.manifests import Manifest

Builder = Callable[[KubernetesSettings, ReplicaIntent, Manifest], Manifest]
Endpoint = Callable[[KubernetesSettings, ReplicaIntent], str]
# The workload, the desired intent hash, its Pods (None: this identity may not read Pods).
ReadinessRule = Callable[
    [readiness.Object, str, Sequence[readiness.Object] | None], readiness.Readiness
]
PodSpecLocator = Callable[[Mapping[str, Any]], Mapping[str, Any]]
Check = tuple[Literal["ok", "warn", "info"], str, str]


@dataclass(frozen=True)
class RequiredField:
    """A field the served API's schema must have; ``why`` says what its absence means."""

    kind: Kind
    path: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class WorkloadApi:
    name: WorkloadApiName
    kinds: tuple[Kind, ...]
    builders: tuple[Builder, ...]
    endpoint: Endpoint
    readiness: ReadinessRule
    # Where the Pod spec is in the workload object, and how many Pods it runs: what the
    # policy's rules read.
    pod_spec: PodSpecLocator
    replica_count: Callable[[Mapping[str, Any]], int]
    # The shipped Kustomize base of a namespace of this API (a directory of deploy/kubernetes):
    # its namespace, ServiceAccounts and the provider's Role granting ``kinds``.
    manifests: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    # Shown when a kind's API is not served: what the operator installs first.
    install_hint: str = ""
    # Checked in the served schema before any write: what the kinds' version must know.
    requires: tuple[RequiredField, ...] = ()
    # Why the workload's controller would never reconcile an object the API server accepts
    # (empty: it would); checked before any write.
    unreconcilable: Callable[[Manifest], list[str]] = lambda obj: []
    # Whether a controller reconciles the owned workloads, as ``doctor`` says it: (status,
    # name, message) over them as listed; None: nothing to say (a built-in controller).
    controller_check: Callable[[Sequence[Manifest]], Check] | None = None
    # Where only the Pods prove which intent a ready workload serves (``readiness``): why,
    # as ``doctor`` warns it when observation may not read them ("": the Pods are optional).
    pods_needed: str = ""

    @property
    def workload_kind(self) -> Kind:
        return self.kinds[0]

    def objects(
        self, settings: KubernetesSettings, intent: ReplicaIntent, *, stack: str | None = None
    ) -> list[Manifest]:
        """The exact objects of one intent, in ``kinds`` order (a fresh metadata per object);
        ``stack``: the identity of the stack applying them."""
        return [
            build(
                settings,
                intent,
                manifests.metadata(settings, intent, self.annotations, stack=stack),
            )
            for build in self.builders
        ]

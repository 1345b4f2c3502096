"""What a stack applied, as its outputs record it: one model, written by the program and read by
every driver.

The program exports, at every run (``program``, ``components``): the namespace and workload API,
the settings it applied (``files.settings_record``: all but the kubeconfig) and, per external
key, its ``KeyRecord``: resource ID, endpoint, the applied intent, and each object's kind, name,
uid and generation as the apply left them. Any process sharing the backend reads them back as
an ``Applied`` (``from_outputs``), so that ``remove``, ``observe`` and a verified no-op judge
against what the stack applied, never against a file's pending edits or the control plane's
database. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypedDict, TypeVar

from infercrane_pulumi.config import files
from infercrane_pulumi.config.intents import (
    KubernetesSettings,
    PolicySettings,
    ReplicaIntent,
    StackConfig,
)
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects import naming

# The stack's outputs, by name.
NAMESPACE_OUTPUT = "namespace"
WORKLOAD_API_OUTPUT = "workloadApi"
SETTINGS_OUTPUT = naming.SETTINGS_OUTPUT
REPLICAS_OUTPUT = "replicas"
DESIRED_OUTPUT = "desiredVersion"
CLUSTER_OUTPUT = "cluster"

T = TypeVar("T")


class ObjectRecord(TypedDict, Generic[T]):
    """One object as the apply left it (``T``: its values, or Pulumi outputs of them)."""

    kind: str
    name: str
    uid: T
    generation: T


class KeyRecord(TypedDict, Generic[T]):
    """One key's entry under ``REPLICAS_OUTPUT`` (``T``: its objects, or a Pulumi output of
    them)."""

    resourceId: str
    endpoint: str
    objects: list[T]
    intent: dict[str, object]


@dataclass(frozen=True)
class AppliedObject:
    """One object as the stack's last successful apply left it."""

    kind: str
    name: str
    uid: str | None
    generation: int | None


@dataclass(frozen=True)
class DesiredVersion:
    """Which version of the desired state a run applied, when it read it from the API server:
    the ConfigMap (``source``: ``ConfigMap/<namespace>/<name>``, and its uid) and its
    ``resourceVersion`` as that read returned it."""

    source: str
    uid: str
    resource_version: str

    def record(self) -> dict[str, str]:
        return {"source": self.source, "uid": self.uid, "resourceVersion": self.resource_version}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> DesiredVersion:
        return cls(str(record["source"]), str(record["uid"]), str(record["resourceVersion"]))


@dataclass(frozen=True)
class ClusterRecord:
    """Which cluster a run applied to: the API server it reached and the certificate authority
    it trusted (``kubeconfigs.ClusterIdentity``), and the uid of the stack's namespace there
    (None: this identity may not read it)."""

    server: str
    certificate_authority: str | None
    namespace_uid: str | None

    def record(self) -> dict[str, str | None]:
        return {
            "server": self.server,
            "certificateAuthority": self.certificate_authority,
            "namespaceUid": self.namespace_uid,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ClusterRecord:
        def optional(name: str) -> str | None:
            value = record.get(name)
            return None if value is None else str(value)

        return cls(
            str(record["server"]), optional("certificateAuthority"), optional("namespaceUid")
        )


@dataclass(frozen=True)
class Provenance:
    """What a driver records beside what it applied: the version of the desired state it read
    (None: a file) and the cluster it applied to."""

    desired: DesiredVersion | None = None
    cluster: ClusterRecord | None = None

    def outputs(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.desired is not None:
            found[DESIRED_OUTPUT] = self.desired.record()
        if self.cluster is not None:
            found[CLUSTER_OUTPUT] = self.cluster.record()
        return found


@dataclass(frozen=True)
class Applied:
    """What the stack's outputs say it applied last: each key's intent and objects, and the
    settings it applied them with (None in outputs written before they were recorded)."""

    intents: tuple[ReplicaIntent, ...] = ()
    objects: Mapping[str, tuple[AppliedObject, ...]] = field(default_factory=dict)
    settings: KubernetesSettings | None = None
    # Each key's record in the outputs, exactly as the program wrote it: what a run that
    # leaves a verified key out of the program exports for it (``handoff.Carried``).
    records: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The version of the desired state the run read from the API server (None: it was given
    # a file, or ran by hand), and the cluster it applied to (None: ran by hand, or before
    # this was recorded).
    desired: DesiredVersion | None = None
    cluster: ClusterRecord | None = None

    def config(self, given: KubernetesSettings) -> StackConfig:
        """What the stack applied, as a configuration (validated as a whole): its intents
        under its recorded settings, which hold no kubeconfig, so ``given``'s is used (the
        credentials of whoever reads the cluster). Outputs that predate the record: under
        ``given``, which a caller that must not apply pending edits proves first (the
        ``keep`` of ``cluster.verdict``). Under no policy (``PolicySettings.judging_nothing``).
        ``given``'s kubeconfig is attached once the record is validated, as ``given`` holds it:
        already validated, or the run's resolved one (``kubeconfigs.for_run``), which
        ``in-cluster`` holds too."""
        settings = given if self.settings is None else self.settings
        config = parse_stack_config(
            files.settings_record(settings),
            [intent.model_dump(mode="json", by_alias=True) for intent in self.intents],
            PolicySettings.judging_nothing().model_dump(mode="json", by_alias=True),
        )
        reader = config.kubernetes.model_copy(update={"kubeconfig": given.kubeconfig})
        return config.model_copy(update={"kubernetes": reader})


def from_outputs(outputs: Mapping[str, Any]) -> Applied:
    """The stack's outputs as the program wrote them. Raises ``ValueError``, ``KeyError``,
    ``TypeError`` or ``AttributeError`` for a shape the program never writes."""
    replicas = (outputs.get(REPLICAS_OUTPUT) or {}).values()
    settings = outputs.get(SETTINGS_OUTPUT)
    desired = outputs.get(DESIRED_OUTPUT)
    cluster = outputs.get(CLUSTER_OUTPUT)
    return Applied(
        desired=None if desired is None else DesiredVersion.from_record(desired),
        cluster=None if cluster is None else ClusterRecord.from_record(cluster),
        settings=None if settings is None else KubernetesSettings.model_validate(settings),
        intents=tuple(ReplicaIntent.model_validate(entry["intent"]) for entry in replicas),
        objects={
            entry["intent"]["externalKey"]: tuple(
                AppliedObject(
                    kind=str(o["kind"]),
                    name=str(o["name"]),
                    uid=o.get("uid"),
                    generation=o.get("generation"),
                )
                for o in entry["objects"]
            )
            for entry in replicas
        },
        records={entry["intent"]["externalKey"]: entry for entry in replicas},
    )

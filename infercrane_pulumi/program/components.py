"""The thin Pulumi layer: one explicit provider per stack, one component per replica intent.

Objects come verbatim from the workload-API table, marked with the identity of the stack that
applies them; each is registered under the Pulumi type token its kind names, as
``<component>-<kind>``, with ``retainOnDelete``: the engine deletes by name, so it never
deletes an object of ours; the ownership rule deletes them, each by its checked uid
(``cluster.deletion``), and the engine only forgets (the program binds each component to its
delete hook for a person's destroy: ``program.DELETE_HOOK``). This module decides nothing about
the objects and never reads the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.workloads import KINDS
from infercrane_pulumi.program.records import KeyRecord, ObjectRecord

# The pulumi-kubernetes plugin the program asks for, whichever SDK of the supported range is
# installed (an SDK asks for its own version otherwise): the one hack/tools builds and the
# conformance suite runs.
PLUGIN_VERSION = "4.25.0"


def stack_provider(settings: KubernetesSettings, name: str | None = None) -> k8s.Provider:
    """The stack's only provider (``name``: a component package's, one per component):
    explicit kubeconfig, context and namespace, server-side apply on. The SDK defaults every
    input it is not given from the serving process's environment (``KUBECONFIG``,
    ``PULUMI_K8S_*``), and the program runs in a driver's process, whose environment is not
    the run's: each such input is given, the others at the plugin's own defaults."""
    assert settings.kubeconfig is not None, "the run's kubeconfig is resolved first"
    return k8s.Provider(
        name or naming.provider_name(settings),
        context=settings.context,
        namespace=settings.namespace,
        kubeconfig=pulumi.Output.secret(settings.kubeconfig),
        # A new kubeconfig (rotated credentials, another path) must not replace every object;
        # only a different context means a different cluster.
        cluster_identifier=settings.context,
        enable_server_side_apply=True,
        delete_unreachable=False,
        skip_update_unreachable=False,
        enable_config_map_mutable=False,
        enable_secret_mutable=False,
        suppress_deprecation_warnings=False,
        suppress_helm_hook_warnings=False,
        opts=pulumi.ResourceOptions(version=PLUGIN_VERSION),
    )


class ReplicaComponent(pulumi.ComponentResource):
    """One replica intent: the objects its workload API built for it (``objects``, rendered
    once for the run: ``workloads.render``), parented to it. ``name``: the component's own,
    the key's object name unless a program of the component package named it."""

    resource_id: str
    endpoint: str
    objects: list[pulumi.Output[ObjectRecord[Any]]]
    intent: dict[str, object]

    def __init__(
        self,
        *,
        settings: KubernetesSettings,
        intent: ReplicaIntent,
        objects: Sequence[Manifest],
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(
            naming.REPLICA_TYPE, name or naming.object_name(intent.external_key), None, opts
        )
        child_opts = pulumi.ResourceOptions(parent=self, provider=provider, retain_on_delete=True)
        desired = list(objects)
        self.children = [
            pulumi.CustomResource(
                KINDS[obj["kind"]].pulumi_type,
                naming.child_name(intent.external_key, obj["kind"]),
                obj,
                child_opts,
            )
            for obj in desired
        ]
        self.resource_id = naming.resource_id(settings, intent.external_key)
        self.endpoint = workloads.endpoint(settings, intent)
        # Each object as the apply left it (uid, generation): a later run that finds every
        # object still so, and no change in the intents, need not start the engine.
        self.objects = [
            _as_applied(obj, child) for obj, child in zip(desired, self.children, strict=True)
        ]
        # The applied intent travels with the state, so any process sharing the backend
        # knows what the stack holds (observe, remove) without the control plane's database.
        self.intent = intent.model_dump(mode="json", by_alias=True)
        # Kept in the component's state too: when the engine deletes the component, its delete
        # hook finds the key to delete in these old outputs (``program.delete_hook``).
        self.register_outputs(self.outputs())

    def outputs(self) -> KeyRecord[pulumi.Output[ObjectRecord[Any]]]:
        """This key's record in the stack's outputs (``records``)."""
        return KeyRecord(
            resourceId=self.resource_id,
            endpoint=self.endpoint,
            objects=self.objects,
            intent=self.intent,
        )


def _as_applied(obj: Manifest, child: pulumi.CustomResource) -> pulumi.Output[ObjectRecord[Any]]:
    """The object's kind and name, and the uid and generation the apply left it with."""
    live: pulumi.Output[Any] = child.metadata  # type: ignore[attr-defined]
    return live.apply(
        lambda meta: ObjectRecord(
            kind=obj["kind"],
            name=obj["metadata"]["name"],
            uid=(meta or {}).get("uid"),
            generation=(meta or {}).get("generation"),
        )
    )

"""The thin Pulumi layer: one explicit provider per stack, one component per replica intent.

Objects come verbatim from the workload-API table, marked with the identity of the stack that
applies them; each is registered under the Pulumi type token its kind names, as
``<component>-<kind>``, with ``retainOnDelete``: the engine deletes by name, so it never
deletes an object of ours; the ownership rule deletes them, each by its checked uid
(``cluster.deletion``), and the engine only forgets. This module decides nothing about the
objects and never reads the cluster.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.kinds import KINDS
from infercrane_pulumi.manifests import Manifest

# The pulumi-kubernetes plugin the program asks for, whichever SDK of the supported range is
# installed (an SDK asks for its own version otherwise): the one hack/tools builds and the
# conformance suite runs.
PLUGIN_VERSION = "4.25.0"


def stack_provider(settings: KubernetesSettings) -> k8s.Provider:
    """The stack's only provider: explicit context and namespace, server-side apply on."""
    kubeconfig = None if settings.kubeconfig is None else pulumi.Output.secret(settings.kubeconfig)
    return k8s.Provider(
        naming.provider_name(settings),
        context=settings.context,
        namespace=settings.namespace,
        kubeconfig=kubeconfig,
        # A new kubeconfig (rotated credentials, another path) must not replace every object;
        # only a different context means a different cluster.
        cluster_identifier=settings.context,
        enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(version=PLUGIN_VERSION),
    )


class ReplicaComponent(pulumi.ComponentResource):
    """One replica intent: the objects its workload API builds, parented to it."""

    resource_id: str
    endpoint: str
    objects: list[pulumi.Output[dict[str, object]]]
    intent: dict[str, object]

    def __init__(
        self,
        *,
        settings: KubernetesSettings,
        intent: ReplicaIntent,
        provider: k8s.Provider,
        stack: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        name = naming.object_name(intent.external_key)
        super().__init__(naming.REPLICA_TYPE, name, None, opts)
        child_opts = pulumi.ResourceOptions(parent=self, provider=provider, retain_on_delete=True)
        desired = workloads.replica_objects(settings, intent, stack=stack)
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
        self.register_outputs(self.outputs())

    def outputs(self) -> dict[str, object]:
        return {
            "resourceId": self.resource_id,
            "endpoint": self.endpoint,
            "objects": self.objects,
            "intent": self.intent,
        }


def _as_applied(obj: Manifest, child: pulumi.CustomResource) -> pulumi.Output[dict[str, object]]:
    """The object's kind and name, and the uid and generation the apply left it with."""
    live: pulumi.Output[Any] = child.metadata  # type: ignore[attr-defined]
    return live.apply(
        lambda meta: {
            "kind": obj["kind"],
            "name": obj["metadata"]["name"],
            "uid": (meta or {}).get("uid"),
            "generation": (meta or {}).get("generation"),
        }
    )

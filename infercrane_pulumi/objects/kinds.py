"""The Kubernetes kinds this provider knows, as plain data: API group, version, REST paths, the
fields Kubernetes refuses to change in place, and the Pulumi type token that carries each one.
Which of them a stack owns is the workload table's to say (``workloads.KINDS``). Pure: no
client, no Pulumi."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str
    # Served by every API server; a custom resource's API must be checked before use.
    builtin: bool = True
    # Paths the API server refuses to change in place: a change replaces the object.
    immutable: tuple[tuple[str, ...], ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``plural.group`` as RBAC and ``kubectl`` name it (``services``, ``deployments.apps``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def pulumi_type(self) -> str:
        return f"kubernetes:{self.group or 'core'}/{self.version}:{self.kind}"

    def collection(self, namespace: str) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{base}/namespaces/{namespace}/{self.plural}"

    def path(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{name}"


# A Deployment's selector is immutable in apps/v1; a Service's cluster IPs once allocated.
DEPLOYMENT = Kind("Deployment", "apps", "v1", "deployments", immutable=(("spec", "selector"),))
SERVICE = Kind(
    "Service", "", "v1", "services", immutable=(("spec", "clusterIP"), ("spec", "clusterIPs"))
)
INFERENCE_SERVICE = Kind(
    "InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices", builtin=False
)
POD = Kind("Pod", "", "v1", "pods")
# Not ours: the stack file a runner reads from the API server (``cluster.desired``).
CONFIG_MAP = Kind("ConfigMap", "", "v1", "configmaps")

"""Everything that differs per workload API, in one table.

One entry per value of ``infercrane:kubernetes.workloadApi``: the kinds it owns (the serving
workload first; each kind carries its apiVersion and immutable fields), how an intent becomes
those objects, the endpoint it serves at, the annotations it adds, the readiness rule
``observe`` applies, and the shipped RBAC files (under ``deploy/kubernetes``) that grant the
provider those kinds. Every other module, the dev bootstrap included, asks this table instead
of branching on the API's name, so a new backend is one entry plus its tests. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from infercrane_pulumi.config.intents import (
    KubernetesSettings,
    ReplicaIntent,
    StackConfig,
    WorkloadApiName,
)
from infercrane_pulumi.objects import manifests, naming, readiness
from infercrane_pulumi.objects.kinds import DEPLOYMENT, INFERENCE_SERVICE, SERVICE, Kind
from infercrane_pulumi.objects.manifests import Manifest

DNS_LABEL_MAX = 63
Builder = Callable[[KubernetesSettings, ReplicaIntent, Manifest], Manifest]
Endpoint = Callable[[KubernetesSettings, ReplicaIntent], str]
# The workload, the desired intent hash, its Pods (None: this identity may not read Pods).
ReadinessRule = Callable[
    [readiness.Object, str, Sequence[readiness.Object] | None], readiness.Readiness
]


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


def _service_endpoint(settings: KubernetesSettings, intent: ReplicaIntent) -> str:
    name = naming.object_name(intent.external_key)
    return f"http://{name}.{settings.namespace}.svc:{intent.effective_port}"


def _predictor_endpoint(settings: KubernetesSettings, intent: ReplicaIntent) -> str:
    # KServe Standard mode fronts the predictor with its own Service on port 80.
    name = naming.object_name(intent.external_key)
    return f"http://{name}-predictor.{settings.namespace}.svc:80"


def _kserve_host_label(obj: Manifest) -> list[str]:
    # KServe names the predictor's host "<name>-predictor-<namespace>" (its default
    # ingress.domainTemplate, applied even with ingress creation off) and refuses to reconcile
    # an InferenceService whose label is longer than a DNS label may be.
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    label = f"{name}-predictor-{namespace}"
    if len(label) <= DNS_LABEL_MAX:
        return []
    return [
        f"InferenceService/{namespace}/{name}: KServe names its predictor's host {label} "
        f"({len(label)} characters, over the {DNS_LABEL_MAX} of a DNS label) and never "
        f"reconciles it; in KServe mode a namespace has at most "
        f"{DNS_LABEL_MAX - len(label) + len(namespace)} characters"
    ]


WORKLOAD_APIS: Mapping[WorkloadApiName, WorkloadApi] = {
    "deployment": WorkloadApi(
        name="deployment",
        kinds=(DEPLOYMENT, SERVICE),
        builders=(manifests.deployment, manifests.service),
        endpoint=_service_endpoint,
        readiness=readiness.deployment,
        manifests="base",
    ),
    "kserve": WorkloadApi(
        name="kserve",
        kinds=(INFERENCE_SERVICE,),
        builders=(manifests.inference_service,),
        endpoint=_predictor_endpoint,
        readiness=readiness.inference_service,
        manifests="kserve",
        annotations={
            "serving.kserve.io/deploymentMode": "Standard",
            # InferCrane owns scaling: KServe then makes no HPA and runs minReplicas Pods.
            "serving.kserve.io/autoscalerClass": "none",
        },
        install_hint="install KServe and its CRDs first, then apply the Kustomize base "
        "deploy/kubernetes/kserve through your overlay",
        # The Standard mode is an annotation value no schema lists, and KServe before v0.16
        # silently runs an unknown mode as its default (Serverless, say). storageUris came
        # into the schema with v0.16, the first release that knows Standard.
        unreconcilable=_kserve_host_label,
        requires=(
            RequiredField(
                INFERENCE_SERVICE,
                ("spec", "predictor", "storageUris"),
                "this KServe predates v0.16, the first that knows the Standard deployment "
                "mode (an older one runs it in its default mode); install KServe v0.16 or later",
            ),
        ),
    ),
}


# Every kind any workload API owns: what a stack may hold, whichever API it used.
OWNED_KINDS: tuple[Kind, ...] = tuple(
    dict.fromkeys(kind for api in WORKLOAD_APIS.values() for kind in api.kinds)
)


def workload_api(settings: KubernetesSettings) -> WorkloadApi:
    return WORKLOAD_APIS[settings.workload_api]


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

    def all(self) -> list[Manifest]:
        """Every object, sorted by name then kind (the order ``render`` prints)."""
        found = [obj for objects in self.objects.values() for obj in objects]
        return sorted(found, key=lambda obj: (obj["metadata"]["name"], obj["kind"]))


def render(config: StackConfig, *, stack: str | None) -> Rendered:
    """``config``'s objects; ``stack``: the identity of the stack applying them
    (``naming.stack_identity``; None: unmarked, as ``render`` prints them)."""
    return Rendered(
        config,
        stack,
        {
            intent.external_key: tuple(replica_objects(config.kubernetes, intent, stack=stack))
            for intent in config.replicas
        },
    )


def stack_objects(config: StackConfig, *, stack: str | None = None) -> list[Manifest]:
    """Every object of the stack (``render``), sorted by name then kind."""
    return render(config, stack=stack).all()

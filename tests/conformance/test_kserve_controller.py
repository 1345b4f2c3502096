"""KServe Standard mode as a real KServe controller treats it.

On the local backend, KServe v0.20.0 (built from the pinned module, ``hack/tools``) runs beside
a control plane of these scenarios' own, with its CRDs and webhooks, and its predictor runs the
stand-in server on the real node (needs root on Debian 12 and the machine's one real-node lock;
otherwise skipped with the reason, failed under INFERCRANE_REQUIRE_TOOLS=1). On an existing
cluster (``make conformance``) they drive the KServe that cluster runs, in a namespace of the
run, on one of its GPU nodes with the operator's portable workload; they skip, saying why, where
that cluster serves no usable InferenceService API, has no KServe webhook, no schedulable GPU
node or no workload. What only the local backend can do stays local: reach the predictor from
this host, and stop the controller.

The provider identity is bound to the shipped KServe Role (InferenceServices only) and the
optional Pod reader; everything else is read as admin.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.tests.realnode_fixtures import SERVER_IMAGE, node_spec, require_real_node
from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.cluster.observe import ReplicaObservation
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.errors import InferCraneError
from infercrane_pulumi.objects import naming
from tests.conformance.backends import Backend, ExternalBackend
from tests.conformance.harness import IMAGE, wait_for
from tests.conformance.ledger import read_raw
from tests.conformance.realnode import (
    STANDIN_RESOURCES,
    Answer,
    http_get,
    state_environment,
    wait_ready,
)

pytestmark = [pytest.mark.conformance, pytest.mark.kserve_controller, pytest.mark.timeout(900)]
MODEL = "Qwen/Qwen3-0.6B"
READY_SECONDS = 240
PREDICTOR_PORT = 80  # KServe's predictor Service
NETWORK_POLICY = DEPLOY_DIR / "network-policy" / "runtime-ingress.yaml"
# What KServe's install registers, however it was installed (upstream's name).
KSERVE_WEBHOOK = "inferenceservice.serving.kserve.io"
ProviderApi = Callable[[], contextlib.AbstractContextManager[client.ApiClient]]


@dataclass
class Site:
    """Where the scenarios run: a stack as the provider, admin to read back, and the local
    control plane whose KServe they may stop and whose Services this host reaches (None on an
    existing cluster)."""

    stack: NamespaceStack
    settings: KubernetesSettings
    worker_key: str
    admin: client.ApiClient
    provider_api: ProviderApi
    intent_fields: dict[str, Any] = field(default_factory=dict)
    plane: LocalControlPlane | None = None

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    def observe(self, key: str) -> ReplicaObservation:
        [found] = self.stack.observe(key)
        return found

    def predictor(self, key: str) -> str:
        return f"{naming.object_name(key)}-predictor"

    def get(self, key: str, path: str, token: str = "") -> Answer | None:
        service: Any = client.CoreV1Api(self.admin).read_namespaced_service(
            self.predictor(key), self.namespace
        )
        return http_get(str(service.spec.cluster_ip), PREDICTOR_PORT, path, token)

    def answer(self, key: str, path: str, token: str = "") -> Answer:
        return wait_for(
            lambda: self.get(key, path, token),
            timeout=30,
            what=f"{key} answering {path} through its predictor Service",
        )

    def pods(self, key: str) -> list[Any]:
        selector = f"serving.kserve.io/inferenceservice={naming.object_name(key)}"
        found = client.CoreV1Api(self.admin).list_namespaced_pod(
            self.namespace, label_selector=selector
        )
        return list(found.items)

    def intent(self, key: str, **extra: Any) -> ReplicaIntent:
        return ReplicaIntent.model_validate(
            {"externalKey": key, "model": MODEL, "gpu": "NVIDIA-L4"} | self.intent_fields | extra
        )


@pytest.fixture(scope="module")
def site(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    workdir = tmp_path_factory.mktemp("kserve")
    made = (
        existing_site(backend, workdir)
        if isinstance(backend, ExternalBackend)
        else local_site(backend, workdir)
    )
    with made as ready:
        yield ready


def ready(site: Site, key: str) -> ReplicaObservation:
    return wait_ready(
        lambda: site.observe(key), timeout=READY_SECONDS, what=f"{key} ready through KServe"
    )


@contextlib.contextmanager
def local_site(backend: Backend, workdir: Path) -> Iterator[Site]:
    backend.local("these scenarios drive the local control plane's own KServe controller")
    require_real_node()
    # A control plane of their own beside the suite's: KServe's CRDs there would clash with
    # the fixture CRD the API-only scenarios install and remove.
    namespace = "kserve-replicas"
    with (
        LocalControlPlane(scheduling=True, real_node=node_spec(), kserve=True) as plane,
        plane.api_client(plane.admin_context) as admin,
    ):
        bootstrapped = bootstrap_namespace(
            admin, namespace, deploy_dir=DEPLOY_DIR, workload_api="kserve", observe=True
        )
        settings = KubernetesSettings.model_validate(
            {
                "context": plane.provider_context,
                "namespace": namespace,
                "workloadApi": "kserve",
                "imageDigest": plane.node_images[SERVER_IMAGE],
                "resources": STANDIN_RESOURCES,
            }
        )
        env = state_environment(plane.kubeconfig_path, workdir / "state")
        stack = NamespaceStack(settings, env, workdir / "workspace")
        try:
            yield Site(
                stack,
                settings,
                bootstrapped.worker_secret_value,
                admin,
                lambda: plane.api_client(plane.provider_context),
                plane=plane,
            )
        finally:
            plane.start_kserve()  # a scenario may have stopped it
            stack.destroy()


@contextlib.contextmanager
def existing_site(backend: ExternalBackend, workdir: Path) -> Iterator[Site]:
    cluster = backend.description
    if not backend.kserve.served() or backend.kserve.ours():
        pytest.skip(f"this cluster ({cluster}) has no KServe: no InferenceService API of its own")
    problem = backend.kserve.problem()
    if problem is not None:
        pytest.skip(f"this cluster's KServe cannot run InferCrane's: {problem}")
    webhooks = client.AdmissionregistrationV1Api(backend.admin)
    if read_raw(webhooks.read_mutating_webhook_configuration, KSERVE_WEBHOOK) is None:
        pytest.skip(
            f"this cluster ({cluster}) serves the InferenceService API but registers no KServe "
            f"webhook ({KSERVE_WEBHOOK}): no KServe controller is installed"
        )
    with backend.gpu_supply() as supply:
        target = supply.schedulable("NVIDIA-L4")
    tenant = backend.tenant(workdir, workload_api="kserve", observe=True)
    settings = KubernetesSettings.model_validate(
        {
            "context": tenant.provider.context,
            "namespace": tenant.namespace,
            "workloadApi": "kserve",
            "imageDigest": IMAGE,  # never run: each intent carries the operator's workload
        }
        | target.settings()
    )
    env = state_environment(tenant.provider.kubeconfig, workdir / "state")
    stack = NamespaceStack(settings, env, workdir / "workspace")
    try:
        yield Site(
            stack,
            settings,
            tenant.bootstrapped.worker_secret_value,
            backend.admin,
            tenant.provider.api_client,
            intent_fields={"gpu": target.product} | target.intent_fields(),
        )
    finally:
        stack.destroy()
        backend.ledger.delete_namespace(tenant.namespace)


def serving_revision(site: Site, key: str) -> str:
    """The revision the replica serves: the intent its ready predictor Pods run and, where this
    host reaches them (local), what their server answers with the worker key."""
    pods = [pod for pod in site.pods(key) if _ready(pod)]
    assert pods, f"{key}: no predictor Pod is ready"
    by_hash = {
        naming.intent_hash(site.settings, site.intent(key, modelRevision=revision)): revision
        for revision in ("r1", "r2")
    }
    [revision] = {
        by_hash.get(pod.metadata.annotations[naming.ANNOTATION_INTENT_HASH], "another intent")
        for pod in pods
    }
    if site.plane is not None:
        answer = site.answer(key, "/v1/models", site.worker_key)
        assert answer.status == 200, answer
        [model] = answer.body["data"]
        assert (model["id"], model["revision"]) == (MODEL, revision)
    return revision


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_kserve_runs_our_predictor_which_serves_with_the_key_and_no_autoscaler(
    site: Site,
) -> None:
    key, namespace = "kserve-r0", site.namespace
    [created] = site.stack.ensure([site.intent(key, modelRevision="r1")]).replicas
    predictor = f"http://{site.predictor(key)}.{namespace}.svc"
    assert (created.change, created.endpoint) == ("create", f"{predictor}:80")
    # Once KServe has written its address, observation reports KServe's form of it.
    assert ready(site, key).endpoint == f"{predictor}.cluster.local"
    assert serving_revision(site, key) == "r1"
    if site.plane is not None:  # this host reaches the local plane's Services
        assert site.answer(key, "/v1/models").status == 401

    # InferCrane owns scaling: no HPA, and the predictor runs the one replica the intent says.
    autoscalers = client.AutoscalingV2Api(site.admin).list_namespaced_horizontal_pod_autoscaler
    assert autoscalers(namespace).items == []
    deployment: Any = client.AppsV1Api(site.admin).read_namespaced_deployment(
        site.predictor(key), namespace
    )
    assert (deployment.spec.replicas, deployment.spec.strategy.type) == (1, "Recreate")
    # The optional NetworkPolicy selects the predictor's Pods: KServe copies our labels.
    policy = yaml.safe_load(NETWORK_POLICY.read_text())
    selector = policy["spec"]["podSelector"]["matchLabels"]
    [pod] = site.pods(key)
    assert selector.items() <= pod.metadata.labels.items()

    # The provider identity (the shipped KServe Role) has no power over what KServe generates.
    with site.provider_api() as provider:
        with pytest.raises(client.ApiException) as denied:
            client.AppsV1Api(provider).delete_namespaced_deployment(site.predictor(key), namespace)
        assert denied.value.status == 403

    # KServe's defaulting webhook changed nothing of ours: the next run is a verified no-op.
    again = site.stack.ensure([site.intent(key, modelRevision="r1")])
    assert (again.verified_unchanged, [r.change for r in again.replicas]) == (True, ["same"])


def test_a_revision_change_is_never_ready_before_the_new_revision_serves(site: Site) -> None:
    key = "kserve-rev"
    site.stack.ensure([site.intent(key, modelRevision="r1")])
    ready(site, key)
    [changed] = site.stack.ensure([site.intent(key, modelRevision="r2")]).replicas
    assert changed.change == "update"
    seen: list[str] = []

    def serving_r2() -> bool:
        observed = site.observe(key)
        seen.append(observed.state)
        if observed.state != "ready":
            return False
        assert serving_revision(site, key) == "r2", f"ready while r1 serves: {seen}"
        return True

    wait_for(serving_r2, timeout=READY_SECONDS, what=f"{key} ready at r2")
    assert seen[0] != "ready", seen


def test_removing_a_key_takes_kserve_s_generated_objects_with_it(site: Site) -> None:
    keep, drop = "kserve-keep", "kserve-drop"
    site.stack.ensure([site.intent(keep), site.intent(drop)])
    wait_for(lambda: site.pods(drop) or None, timeout=60, what=f"{drop}'s predictor Pod")
    result = site.stack.ensure([site.intent(keep)])
    assert {r.external_key: r.change for r in result.replicas} == {keep: "same", drop: "delete"}
    apps, core = client.AppsV1Api(site.admin), client.CoreV1Api(site.admin)

    def generated() -> list[str]:
        found: list[Any] = [
            *apps.list_namespaced_deployment(site.namespace).items,
            *core.list_namespaced_service(site.namespace).items,
        ]
        names = [str(obj.metadata.name) for obj in found]
        return sorted(n for n in names if n.startswith(naming.object_name(drop)))

    wait_for(lambda: not generated(), timeout=60, what=f"{drop}'s predictor objects gone")
    assert site.pods(keep)


def test_with_the_controller_down_the_webhooks_refuse_and_a_retry_converges(site: Site) -> None:
    if site.plane is None:
        pytest.skip("stops the KServe controller: only the local control plane's own may be")
    key, plane = "kserve-down", site.plane
    plane.stop_kserve()
    try:
        with pytest.raises(InferCraneError) as refused:
            site.stack.ensure([site.intent(key)])
    finally:
        plane.start_kserve()
    # KServe's defaulter fails closed (as upstream ships it): the API server answers 500 to
    # our strict dry-run, a retryable refusal, and nothing is written.
    assert refused.value.to_record() == {
        "code": "cluster-unavailable",
        "retryable": True,
        "problems": [
            f"InferenceService/{site.namespace}/{naming.object_name(key)}: dry-run apply: "
            "API server answered 500, try again"
        ],
    }
    assert (site.observe(key).state, site.pods(key)) == ("absent", [])
    retried = {r.external_key: r.change for r in site.stack.ensure([site.intent(key)]).replicas}
    assert retried[key] == "create"
    ready(site, key)


def test_switching_the_workload_api_deletes_the_other_api_s_objects_and_frees_the_gpu(
    site: Site, tmp_path: Path
) -> None:
    """A namespace switched from Deployments to KServe and back, one key kept: each run deletes
    the other API's objects of the key by uid, the key ends ready, and no Pod of the old API
    holds a GPU."""
    if site.plane is None:
        pytest.skip("binds both workload APIs' Roles in one namespace: the local plane only")
    namespace = "kserve-switch"
    bootstrapped = bootstrap_namespace(
        site.admin, namespace, deploy_dir=DEPLOY_DIR, workload_api="deployment", observe=True
    )
    bootstrap_namespace(  # its Roles beside the first; the worker Secret is the first's
        site.admin, namespace, deploy_dir=DEPLOY_DIR, workload_api="kserve", observe=True
    )
    key = "switch-r0"
    name = naming.object_name(key)
    apps, core = client.AppsV1Api(site.admin), client.CoreV1Api(site.admin)
    env = state_environment(site.plane.kubeconfig_path, tmp_path / "state")

    def run(workload_api: str) -> NamespaceStack:
        settings = site.settings.model_copy(
            update={"namespace": namespace, "workload_api": workload_api}
        )
        stack = NamespaceStack(settings, env, tmp_path / "workspace")
        stack.ensure([site.intent(key)])
        return stack

    def ours(kind: str) -> list[str]:
        lists: dict[str, Callable[..., Any]] = {
            "Deployment": apps.list_namespaced_deployment,
            "Service": core.list_namespaced_service,
        }
        listed: list[Any] = lists[kind](namespace, label_selector=naming.OWNED_SELECTOR).items
        return [str(obj.metadata.name) for obj in listed if obj.metadata.name == name]

    def gpu_pods() -> list[str]:
        """The key's Pods that hold a GPU, by name: ours, or KServe's predictor's."""
        pods: list[Any] = core.list_namespaced_pod(namespace).items
        return sorted(
            str(pod.metadata.name)
            for pod in pods
            if pod.metadata.deletion_timestamp is None
            and pod.status.phase in ("Pending", "Running")
            and any(
                "nvidia.com/gpu" in ((c.resources.limits or {}) if c.resources else {})
                for c in pod.spec.containers
            )
        )

    def one_gpu_pod(prefix: str) -> list[str] | None:
        found = gpu_pods()
        return found if len(found) == 1 and found[0].startswith(prefix) else None

    first = run("deployment")
    wait_ready(lambda: first.observe(key)[0], timeout=READY_SECONDS, what=f"{key} ready")
    switched = run("kserve")
    wait_ready(lambda: switched.observe(key)[0], timeout=READY_SECONDS, what=f"{key} via KServe")
    assert (ours("Deployment"), ours("Service")) == ([], [])  # deleted in the switching run
    wait_for(lambda: one_gpu_pod(f"{name}-predictor"), timeout=60, what="the old Pod gone")
    back = run("deployment")
    wait_ready(lambda: back.observe(key)[0], timeout=READY_SECONDS, what=f"{key} back")
    custom = client.CustomObjectsApi(site.admin)
    listed: Any = custom.list_namespaced_custom_object(
        "serving.kserve.io", "v1beta1", namespace, "inferenceservices"
    )
    isvcs = listed["items"]
    assert isvcs == []
    wait_for(lambda: one_gpu_pod(name), timeout=60, what="the predictor's Pod gone")
    assert bootstrapped.worker_secret_value
    back.destroy()

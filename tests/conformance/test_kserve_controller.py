"""KServe Standard mode as the real KServe controller treats it: KServe v0.20.0 (built from the
pinned module, ``hack/tools``) runs beside the local control plane with its CRDs and webhooks,
and its predictor runs the stand-in server on the real node.

The provider identity is bound to the shipped KServe Role (InferenceServices only) and the
optional Pod reader; everything else is read as admin. Local control plane only: an existing
cluster's KServe is not driven here (it skips, saying so). Needs a real node (root on Debian 12,
the machine's one real-node lock): otherwise skipped with the reason (failed under
INFERCRANE_REQUIRE_TOOLS=1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes import client

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.tests.realnode_fixtures import SERVER_IMAGE, node_spec, require_real_node
from infercrane_pulumi import naming
from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.cluster.observe import ReplicaObservation
from infercrane_pulumi.errors import InferCraneError
from infercrane_pulumi.intents import KubernetesSettings, ReplicaIntent
from tests.conformance.backends import Backend
from tests.conformance.harness import wait_for
from tests.conformance.realnode import (
    STANDIN_RESOURCES,
    Answer,
    http_get,
    plane_environment,
    wait_ready,
)

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(900)]
NAMESPACE = "kserve-replicas"
MODEL = "Qwen/Qwen3-0.6B"
READY_SECONDS = 240
PREDICTOR_PORT = 80  # KServe's predictor Service
NETWORK_POLICY = DEPLOY_DIR / "network-policy" / "runtime-ingress.yaml"


@pytest.fixture(scope="module")
def plane(backend: Backend) -> Iterator[LocalControlPlane]:
    # Its own control plane beside the suite's: KServe's CRDs there would clash with the
    # fixture CRD the API-only scenarios install and remove.
    backend.local("these scenarios drive the local control plane's own KServe controller")
    require_real_node()
    with LocalControlPlane(scheduling=True, real_node=node_spec(), kserve=True) as started:
        yield started


@dataclass
class Site:
    plane: LocalControlPlane
    stack: NamespaceStack
    worker_key: str
    admin: client.ApiClient

    def observe(self, key: str) -> ReplicaObservation:
        [found] = self.stack.observe(key)
        return found

    def predictor(self, key: str) -> str:
        return f"{naming.object_name(key)}-predictor"

    def get(self, key: str, path: str, token: str = "") -> Answer | None:
        service: Any = client.CoreV1Api(self.admin).read_namespaced_service(
            self.predictor(key), NAMESPACE
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
        found = client.CoreV1Api(self.admin).list_namespaced_pod(NAMESPACE, label_selector=selector)
        return list(found.items)


@pytest.fixture(scope="module")
def site(plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    workdir = tmp_path_factory.mktemp("kserve")
    with plane.api_client(plane.admin_context) as admin:
        bootstrapped = bootstrap_namespace(
            admin, NAMESPACE, deploy_dir=DEPLOY_DIR, workload_api="kserve", observe=True
        )
        env = plane_environment(plane, workdir / "state")
        settings = KubernetesSettings.model_validate(
            {
                "context": plane.provider_context,
                "namespace": NAMESPACE,
                "workloadApi": "kserve",
                "imageDigest": plane.node_images[SERVER_IMAGE],
                "resources": STANDIN_RESOURCES,
            }
        )
        stack = NamespaceStack(settings, env, workdir / "workspace")
        try:
            yield Site(plane, stack, bootstrapped.worker_secret_value, admin)
        finally:
            plane.start_kserve()  # a scenario may have stopped it
            stack.destroy()


def intent(key: str, **extra: Any) -> ReplicaIntent:
    return ReplicaIntent.model_validate(
        {"externalKey": key, "model": MODEL, "gpu": "NVIDIA-L4"} | extra
    )


def ready(site: Site, key: str) -> ReplicaObservation:
    return wait_ready(
        lambda: site.observe(key), timeout=READY_SECONDS, what=f"{key} ready through KServe"
    )


def test_kserve_runs_our_predictor_which_serves_with_the_key_and_no_autoscaler(
    site: Site,
) -> None:
    key = "kserve-r0"
    [created] = site.stack.ensure([intent(key, modelRevision="r1")]).replicas
    predictor = f"http://{site.predictor(key)}.{NAMESPACE}.svc"
    assert (created.change, created.endpoint) == ("create", f"{predictor}:80")
    # Once KServe has written its address, observation reports KServe's form of it.
    assert ready(site, key).endpoint == f"{predictor}.cluster.local"

    answer = site.answer(key, "/v1/models", site.worker_key)
    assert answer.status == 200
    [model] = answer.body["data"]
    assert (model["id"], model["revision"]) == (MODEL, "r1")
    assert site.answer(key, "/v1/models").status == 401

    # InferCrane owns scaling: no HPA, and the predictor runs the one replica the intent says.
    assert (
        client.AutoscalingV2Api(site.admin)
        .list_namespaced_horizontal_pod_autoscaler(NAMESPACE)
        .items
        == []
    )
    deployment: Any = client.AppsV1Api(site.admin).read_namespaced_deployment(
        site.predictor(key), NAMESPACE
    )
    assert (deployment.spec.replicas, deployment.spec.strategy.type) == (1, "Recreate")
    # The optional NetworkPolicy selects the predictor's Pods: KServe copies our labels.
    policy = yaml.safe_load(NETWORK_POLICY.read_text())
    selector = policy["spec"]["podSelector"]["matchLabels"]
    [pod] = site.pods(key)
    assert selector.items() <= pod.metadata.labels.items()

    # The provider identity (the shipped KServe Role) has no power over what KServe generates.
    with site.plane.api_client(site.plane.provider_context) as provider:
        with pytest.raises(client.ApiException) as denied:
            client.AppsV1Api(provider).delete_namespaced_deployment(site.predictor(key), NAMESPACE)
        assert denied.value.status == 403

    # KServe's defaulting webhook changed nothing of ours: the next run is a verified no-op.
    again = site.stack.ensure([intent(key, modelRevision="r1")])
    assert (again.verified_unchanged, [r.change for r in again.replicas]) == (True, ["same"])


def test_a_revision_change_is_never_ready_before_the_new_revision_serves(site: Site) -> None:
    key = "kserve-rev"
    site.stack.ensure([intent(key, modelRevision="r1")])
    ready(site, key)
    [changed] = site.stack.ensure([intent(key, modelRevision="r2")]).replicas
    assert changed.change == "update"
    seen: list[str] = []

    def serving_r2() -> bool:
        observed = site.observe(key)
        seen.append(observed.state)
        if observed.state != "ready":
            return False
        answer = site.answer(key, "/v1/models", site.worker_key)
        assert answer.body["data"][0]["revision"] == "r2", f"ready while r1 serves: {seen}"
        return True

    wait_for(serving_r2, timeout=READY_SECONDS, what=f"{key} ready at r2")
    assert seen[0] != "ready", seen


def test_removing_a_key_takes_kserve_s_generated_objects_with_it(site: Site) -> None:
    keep, drop = "kserve-keep", "kserve-drop"
    site.stack.ensure([intent(keep), intent(drop)])
    wait_for(lambda: site.pods(drop) or None, timeout=60, what=f"{drop}'s predictor Pod")
    result = site.stack.ensure([intent(keep)])
    assert {r.external_key: r.change for r in result.replicas} == {keep: "same", drop: "delete"}
    apps, core = client.AppsV1Api(site.admin), client.CoreV1Api(site.admin)

    def generated() -> list[str]:
        found: list[Any] = [
            *apps.list_namespaced_deployment(NAMESPACE).items,
            *core.list_namespaced_service(NAMESPACE).items,
        ]
        names = [str(obj.metadata.name) for obj in found]
        return sorted(n for n in names if n.startswith(naming.object_name(drop)))

    wait_for(lambda: not generated(), timeout=60, what=f"{drop}'s predictor objects gone")
    assert site.pods(keep)


def test_with_the_controller_down_the_webhooks_refuse_and_a_retry_converges(site: Site) -> None:
    key = "kserve-down"
    site.plane.stop_kserve()
    try:
        with pytest.raises(InferCraneError) as refused:
            site.stack.ensure([intent(key)])
    finally:
        site.plane.start_kserve()
    # KServe's defaulter fails closed (as upstream ships it): the API server answers 500 to
    # our strict dry-run, a retryable refusal, and nothing is written.
    assert refused.value.to_record() == {
        "code": "cluster-unavailable",
        "retryable": True,
        "problems": [
            f"InferenceService/{NAMESPACE}/{naming.object_name(key)}: dry-run apply: "
            "API server answered 500, try again"
        ],
    }
    assert (site.observe(key).state, site.pods(key)) == ("absent", [])
    retried = {r.external_key: r.change for r in site.stack.ensure([intent(key)]).replicas}
    assert retried[key] == "create"
    ready(site, key)

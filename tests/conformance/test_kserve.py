"""KServe Standard mode on the real engine: against the cluster's InferenceService API, or the
trimmed fixture CRD where the run may install it (see ``kserve_api.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.errors import OwnershipError, RejectedError
from infercrane_pulumi.objects import kinds, naming
from infercrane_pulumi.objects.workloads import WORKLOAD_APIS
from tests.conformance.backends import Backend
from tests.conformance.harness import Harness, managers, replica

pytestmark = pytest.mark.conformance


@pytest.fixture
def inference_service_api(backend: Backend) -> None:
    """The InferenceService API is served, or the test skips saying why it cannot be."""
    absent = backend.kserve.ensure()
    if absent is not None:
        pytest.skip(absent)


def test_kserve_mode_creates_one_standard_inference_service(
    inference_service_api: None, kserve_harness: Harness, backend: Backend, tmp_path: Path
) -> None:
    kserve_harness.configure([replica("kserve-r0")], workloadApi="kserve")
    assert [r.change for r in kserve_harness.preview().replicas] == ["create"]
    result = kserve_harness.up()
    assert [(r.change, [o.kind for o in r.objects]) for r in result.replicas] == [
        ("create", ["InferenceService"])
    ]
    owned = kserve_harness.owned(kinds.INFERENCE_SERVICE)
    assert len(owned) == 1
    [isvc] = owned
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    assert isvc["spec"]["predictor"]["minReplicas"] == 1
    assert isvc["spec"]["predictor"]["maxReplicas"] == 1
    assert ("infercrane-provider-v1", "Apply") in managers(isvc)
    # The provider writes no Deployment (a real KServe generates the predictor's, with our
    # labels copied onto it).
    deployments = kserve_harness.owned(kinds.DEPLOYMENT)
    assert [d for d in deployments if ("infercrane-provider-v1", "Apply") in managers(d)] == []
    if backend.kserve.ours():  # the fixture CRD this run installed: no controller runs
        stack = kserve_harness.namespace_stack(tmp_path / "observer", workloadApi="kserve")
        [seen] = stack.observe()
        assert (seen.state, seen.reason) == (
            "provisioning",
            "no KServe controller has reconciled this InferenceService",
        )
    kserve_harness.destroy()
    assert kserve_harness.owned(kinds.INFERENCE_SERVICE) == []


def test_kserve_mode_without_the_crd_fails_clearly_before_any_write(
    backend: Backend, kserve_harness: Harness
) -> None:
    kept = backend.kserve.remove()
    if kept is not None:
        pytest.skip(kept)
    kserve_harness.configure([replica("kserve-r0")], workloadApi="kserve")
    for operation in (kserve_harness.preview, kserve_harness.up):
        with pytest.raises(RejectedError) as refused:
            operation()
        assert "InferenceService API serving.kserve.io/v1beta1 is not served" in str(refused.value)
    assert kserve_harness.resource_versions() == {}


def test_a_kserve_before_the_standard_mode_is_refused_in_one_line_before_any_write(
    backend: Backend, kserve_harness: Harness
) -> None:
    kept = backend.kserve.remove()
    if kept is not None:
        pytest.skip(kept)
    try:
        # A cluster without KServe whose run may not install the fixture CRD cannot show it.
        unavailable = backend.kserve.ensure(before_standard_mode=True)
        if unavailable is not None:
            pytest.skip(unavailable)
        kserve_harness.configure([replica("kserve-old")], workloadApi="kserve")
        [required] = WORKLOAD_APIS["kserve"].requires
        for operation in (kserve_harness.preview, kserve_harness.up):
            with pytest.raises(RejectedError) as refused:
                operation()
            assert refused.value.problems == (
                "InferenceService API serving.kserve.io/v1beta1 has no "
                f"spec.predictor.storageUris in its schema: {required.why} "
                f"(context {kserve_harness.provider.context})",
            )
        assert kserve_harness.owned(kinds.INFERENCE_SERVICE) == []
        assert kserve_harness.resource_versions() == {}
    finally:
        backend.kserve.remove()  # the next scenario installs the fixture as KServe serves it


def test_a_foreign_manager_of_our_inference_service_field_fails_the_run_and_keeps_its_value(
    inference_service_api: None, kserve_harness: Harness, backend: Backend
) -> None:
    kserve_harness.configure([replica("kserve-owned")], workloadApi="kserve")
    kserve_harness.up()
    name = naming.object_name("kserve-owned")
    path = kinds.INFERENCE_SERVICE.path(kserve_harness.namespace, name)
    foreign = {
        "apiVersion": kinds.INFERENCE_SERVICE.group_version,
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": kserve_harness.namespace},
        # Both: a real KServe's validator refuses more minReplicas than maxReplicas.
        "spec": {"predictor": {"minReplicas": 2, "maxReplicas": 2}},
    }
    written = RestTransport(backend.admin).request(
        "PATCH",
        path,
        query=[("fieldManager", "autoscaler-of-another-team"), ("force", "true")],
        body=foreign,
        content_type="application/apply-patch+yaml",
    )
    assert written.status == 200, written.body
    with pytest.raises(OwnershipError) as refused:
        kserve_harness.up()
    assert ".spec.predictor.minReplicas" in str(refused.value)
    assert "autoscaler-of-another-team" in str(refused.value)
    live = kserve_harness.get(kinds.INFERENCE_SERVICE, "kserve-owned")
    assert live is not None and live["spec"]["predictor"]["minReplicas"] == 2
    kserve_harness.destroy()

"""KServe Standard mode on the real engine, with the trimmed InferenceService CRD installed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from infercrane_dev.localcluster import LocalControlPlane
from infercrane_pulumi import kinds
from infercrane_pulumi.errors import RejectedError
from tests.conformance.harness import ROOT, Harness, managers, replica, wait_for

pytestmark = pytest.mark.conformance
CRD = ROOT / "tests" / "fixtures" / "kserve-inferenceservice-crd.yaml"
CRD_NAME = "inferenceservices.serving.kserve.io"


def _remove_crd(admin_client: client.ApiClient) -> None:
    api = client.ApiextensionsV1Api(admin_client)
    try:
        api.delete_custom_resource_definition(CRD_NAME)
    except ApiException as error:
        if error.status != 404:
            raise

    def gone() -> bool:
        try:
            api.read_custom_resource_definition(CRD_NAME)
        except ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for(gone, timeout=60, what="CRD removal")


@pytest.fixture
def kserve_crd(control_plane: LocalControlPlane, admin_client: client.ApiClient) -> Iterator[None]:
    control_plane.install_crd(CRD)
    yield
    _remove_crd(admin_client)


def test_kserve_mode_creates_one_standard_inference_service(
    kserve_crd: None, kserve_harness: Harness
) -> None:
    kserve_harness.configure([replica("kserve-r0")], workloadApi="kserve")
    kserve_harness.preview()
    result = kserve_harness.up()
    assert result.summary.result == "succeeded"
    owned = kserve_harness.owned(kinds.INFERENCE_SERVICE)
    assert len(owned) == 1
    [isvc] = owned
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    assert isvc["spec"]["predictor"]["minReplicas"] == 1
    assert isvc["spec"]["predictor"]["maxReplicas"] == 1
    assert ("infercrane-provider-v1", "Apply") in managers(isvc)
    assert kserve_harness.owned(kinds.DEPLOYMENT) == []
    kserve_harness.destroy()
    assert kserve_harness.owned(kinds.INFERENCE_SERVICE) == []


def test_kserve_mode_without_the_crd_fails_clearly_before_any_write(
    admin_client: client.ApiClient, kserve_harness: Harness
) -> None:
    _remove_crd(admin_client)
    kserve_harness.configure([replica("kserve-r0")], workloadApi="kserve")
    for operation in (kserve_harness.preview, kserve_harness.up):
        with pytest.raises(RejectedError) as refused:
            operation()
        assert "InferenceService API serving.kserve.io/v1beta1 is not served" in str(refused.value)
    assert kserve_harness.resource_versions() == {}

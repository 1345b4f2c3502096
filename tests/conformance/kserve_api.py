"""The InferenceService API the KServe scenarios need, and whose it is.

A served API is used as it is: a real KServe, or a CRD another run left. Only when it is absent
and this run may install it (always on the local control plane; with ``KSERVE_CRD=install`` on
an existing cluster) is the trimmed fixture CRD created, carrying the run's label. Only that
CRD is ever removed: a real KServe's is not ours to remove.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from infercrane_dev.localcluster.crds import load_crds
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.cluster.preflight import api_problem
from infercrane_pulumi.objects import kinds
from infercrane_pulumi.objects.workloads import WORKLOAD_APIS
from tests.conformance.harness import ROOT, wait_for
from tests.conformance.ledger import RunLedger, read_raw

CRD_PATH = ROOT / "tests" / "fixtures" / "kserve-inferenceservice-crd.yaml"
CRD_NAME = "inferenceservices.serving.kserve.io"
API = kinds.INFERENCE_SERVICE.group_version


class KServeApi:
    def __init__(self, admin: client.ApiClient, ledger: RunLedger, *, may_install: bool) -> None:
        self.admin = admin
        self.ledger = ledger
        self.may_install = may_install

    def served(self) -> bool:
        return Cluster(RestTransport(self.admin)).served(kinds.INFERENCE_SERVICE)

    def _crd(self) -> dict[str, Any] | None:
        return read_raw(
            client.ApiextensionsV1Api(self.admin).read_custom_resource_definition, CRD_NAME
        )

    def ours(self) -> bool:
        """True if the CRD exists and this run created it."""
        found = self._crd()
        return found is not None and self.ledger.is_ours(found.get("metadata"))

    def problem(self) -> str | None:
        """What the product's preflight says of the API as served (None: usable)."""
        cluster = Cluster(RestTransport(self.admin))
        return api_problem(cluster, kinds.INFERENCE_SERVICE, WORKLOAD_APIS["kserve"])

    def ensure(self, *, before_standard_mode: bool = False) -> str | None:
        """Make the API served if it is absent and may be installed; else why it cannot be.
        ``before_standard_mode``: install the fixture as a KServe before v0.16 would serve it,
        without the schema field that marks the Standard deployment mode."""
        if self.served():
            return None
        if not self.may_install:
            return (
                f"the InferenceService API ({API}) is not served on this cluster and this run "
                "may not install the fixture CRD (make conformance ... KSERVE_CRD=install)"
            )
        [document] = load_crds(CRD_PATH)
        if before_standard_mode:
            schema = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            del schema["properties"]["spec"]["properties"]["predictor"]["properties"]["storageUris"]
        if not self.ledger.create_crd(document):
            return f"CRD {CRD_NAME} appeared while this run was about to install it; not ours"
        # Established is not yet discovered or published: the product's preflight asks both.
        wait_for(
            lambda: self.served() and (self.problem() is not None) == before_standard_mode,
            timeout=60,
            what=f"{API} in discovery and its schema published",
        )
        return None

    def remove(self) -> str | None:
        """Make the API absent if this run installed it; else why it may not be removed."""
        if self._crd() is None and not self.served():
            return None
        if not self.ours():
            return (
                f"the InferenceService API ({API}) is served by a CRD this run did not "
                "install (a real KServe?): not ours to remove"
            )
        self.ledger.delete_crd(CRD_NAME)
        wait_for(
            lambda: self._crd() is None and not self.served(),
            timeout=60,
            what=f"CRD {CRD_NAME} and {API} gone",
        )
        return None

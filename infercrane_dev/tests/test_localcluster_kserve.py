"""What the local control plane makes of KServe's upstream files before its controller starts."""

from __future__ import annotations

import base64
import json
from typing import Any

from infercrane_dev.localcluster import kserve

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def webhook(name: str, path: str) -> dict[str, Any]:
    """A webhook as upstream's config/webhook/manifests.yaml has it (kustomize placeholders)."""
    service = {"name": "$(webhookServiceName)", "namespace": "$(kserveNamespace)", "path": path}
    return {
        "name": name,
        "clientConfig": {"service": service},
        "failurePolicy": "Fail",
        "sideEffects": "None",
    }


def test_webhooks_are_called_on_loopback_by_url_trusting_the_cluster_ca() -> None:
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "inferenceservice.serving.kserve.io", "creationTimestamp": None},
        "webhooks": [
            webhook("inferenceservice.kserve-webhook-server.defaulter", "/mutate-isvc"),
            webhook("inferenceservice.kserve-webhook-server.pod-mutator", "/mutate-pods"),
        ],
    }
    [made] = kserve.webhook_configurations(
        [mutating],
        client_config=kserve.by_url("https://127.0.0.1:9443"),
        ca_pem=CA,
        fail_open=[kserve.POD_MUTATOR],
    )
    bundle = base64.b64encode(CA).decode()
    assert made == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "inferenceservice.serving.kserve.io"},
        "webhooks": [
            {
                "name": "inferenceservice.kserve-webhook-server.defaulter",
                "clientConfig": {"url": "https://127.0.0.1:9443/mutate-isvc", "caBundle": bundle},
                "failurePolicy": "Fail",  # an InferenceService waits for its defaults
                "sideEffects": "None",
            },
            {
                "name": "inferenceservice.kserve-webhook-server.pod-mutator",
                "clientConfig": {"url": "https://127.0.0.1:9443/mutate-pods", "caBundle": bundle},
                "failurePolicy": "Ignore",  # no Pod waits for a stopped controller
                "sideEffects": "None",
            },
        ],
    }


def test_the_config_map_asks_for_standard_mode_and_no_ingress_and_keeps_the_rest() -> None:
    upstream = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inferenceservice-config", "namespace": "kserve"},
        "data": {
            "deploy": '{\n  "defaultDeploymentMode": "Serverless"\n}',
            "ingress": '{"ingressDomain": "example.com", "disableIngressCreation": false}',
            "agent": '{"image": "kserve/agent:latest"}',
        },
    }
    made = kserve.standard_config(upstream)
    assert made["metadata"] == {"name": "inferenceservice-config", "namespace": "kserve"}
    assert {key: json.loads(value) for key, value in made["data"].items()} == {
        "deploy": {"defaultDeploymentMode": "Standard"},
        "ingress": {"ingressDomain": "example.com", "disableIngressCreation": True},
        "agent": {"image": "kserve/agent:latest"},
    }

"""What a Kind cluster makes of KServe's upstream install files (``up --kserve``), as values:
the manager's objects namespaced as kustomize would, our image never pulled, a certificate for
the webhook Service's names from a CA of the cluster's own, and upstream's webhooks pointed at
that Service with their own failure policies. No cluster, no binary."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from infercrane_dev.images.catalog import Executable
from infercrane_dev.kind import kserve
from infercrane_dev.kind.clusterconfig import KindSpec, kind_config
from infercrane_dev.localcluster.kserve import KServeFiles

IMAGE = "infercrane.local/kserve/kserve-controller@sha256:" + "ab" * 32
BINDING_SUBJECT = {"kind": "ServiceAccount", "name": "kserve-controller-manager"}
# Trimmed from KServe v0.20.0's config/ (the fields this module reads or changes).
UPSTREAM: dict[str, list[dict[str, Any]]] = {
    "rbac/service_account.yaml": [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "kserve-controller-manager"},
        }
    ],
    "rbac/role.yaml": [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "kserve-manager-role"},
        }
    ],
    "rbac/role_binding.yaml": [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "kserve-manager-rolebinding"},
            "subjects": [BINDING_SUBJECT],
        }
    ],
    "rbac/leader_election_role.yaml": [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "kserve-leader-election-role"},
        }
    ],
    "rbac/leader_election_role_binding.yaml": [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "kserve-leader-election-rolebinding"},
            "subjects": [BINDING_SUBJECT],
        }
    ],
    "webhook/service.yaml": [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kserve-webhook-server-service", "namespace": "kserve"},
            "spec": {"ports": [{"port": 443, "targetPort": "webhook-server"}]},
        }
    ],
    "manager/manager.yaml": [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "kserve-controller-manager", "namespace": "kserve"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "manager",
                                "image": "ko://github.com/kserve/kserve/cmd/manager",
                                "imagePullPolicy": "Always",
                            }
                        ],
                        "volumes": [
                            {"name": "cert", "secret": {"secretName": "kserve-webhook-server-cert"}}
                        ],
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "kserve-webhook-server-secret", "namespace": "kserve"},
        },
    ],
}
WEBHOOKS = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "inferenceservice.serving.kserve.io", "creationTimestamp": None},
    "webhooks": [
        {
            "name": "inferenceservice.kserve-webhook-server.validator",
            "clientConfig": {
                "service": {
                    "name": "$(webhookServiceName)",
                    "namespace": "$(kserveNamespace)",
                    "path": "/validate-isvc",
                }
            },
            "failurePolicy": "Fail",
        }
    ],
}


@pytest.fixture
def files(tmp_path: Path) -> KServeFiles:
    for relative, documents in UPSTREAM.items():
        path = tmp_path / "install" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(documents))
    (tmp_path / "webhook.yaml").write_text(yaml.safe_dump(WEBHOOKS))
    return KServeFiles(tmp_path)


def test_the_managers_objects_are_upstreams_in_kserve_running_our_image(files: KServeFiles) -> None:
    objects, _ = kserve.install_objects(files, image=IMAGE)
    assert [
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects
    ] == [
        ("ServiceAccount", "kserve-controller-manager", "kserve"),
        ("ClusterRole", "kserve-manager-role", None),
        ("ClusterRoleBinding", "kserve-manager-rolebinding", None),
        ("Role", "kserve-leader-election-role", "kserve"),
        ("RoleBinding", "kserve-leader-election-rolebinding", "kserve"),
        ("Secret", "kserve-webhook-server-secret", "kserve"),
        ("Secret", "kserve-webhook-server-cert", "kserve"),
        ("Service", "kserve-webhook-server-service", "kserve"),
        ("Deployment", "kserve-controller-manager", "kserve"),
    ]
    bindings = [o for o in objects if o["kind"].endswith("RoleBinding")]
    assert [b["subjects"] for b in bindings] == [[BINDING_SUBJECT | {"namespace": "kserve"}]] * 2
    [container] = objects[-1]["spec"]["template"]["spec"]["containers"]
    assert container == {"name": "manager", "image": IMAGE, "imagePullPolicy": "IfNotPresent"}


def test_the_webhooks_call_the_service_trusting_a_ca_that_signed_its_certificate(
    files: KServeFiles,
) -> None:
    objects, webhooks = kserve.install_objects(files, image=IMAGE)
    [secret] = [o for o in objects if o["metadata"]["name"] == "kserve-webhook-server-cert"]
    assert secret["type"] == "kubernetes.io/tls" and set(secret["stringData"]) == {
        "tls.crt",
        "tls.key",
    }
    certificate = x509.load_pem_x509_certificate(secret["stringData"]["tls.crt"].encode())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        "kserve-webhook-server-service",
        "kserve-webhook-server-service.kserve",
        "kserve-webhook-server-service.kserve.svc",
        "kserve-webhook-server-service.kserve.svc.cluster.local",
    ]
    [configuration] = webhooks
    [webhook] = configuration["webhooks"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    certificate.verify_directly_issued_by(ca)
    assert webhook["clientConfig"]["service"] == {
        "name": "kserve-webhook-server-service",
        "namespace": "kserve",
        "path": "/validate-isvc",
        "port": 443,
    }
    assert webhook["failurePolicy"] == "Fail"  # upstream's, as in a user's cluster
    assert configuration["metadata"] == {"name": "inferenceservice.serving.kserve.io"}


def test_a_kind_upstream_never_had_is_refused_in_one_line(files: KServeFiles) -> None:
    extra = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}}
    path = files.install("webhook/service.yaml")
    path.write_text(path.read_text() + "---\n" + yaml.safe_dump(extra))
    with pytest.raises(kserve.KServeInstallError, match=r"kinds not planned for: \['ConfigMap'\]"):
        kserve.install_objects(files, image=IMAGE)


def test_the_manager_image_runs_upstreams_command_as_distroless_nonroot(tmp_path: Path) -> None:
    spec = kserve.manager_image()
    assert (spec.entrypoint, spec.user) == (("/manager",), "65532:65532")
    assert Executable("manager", "kserve-manager") in spec.layers[-1].entries
    binary = tmp_path / "kserve-manager"
    binary.write_bytes(
        b"\x00path\tgithub.com/kserve/kserve/cmd/manager\ndep\tgithub.com/kserve/kserve\tv0.20.0\th1:x=\n"
    )
    assert kserve.manager_version(binary) == "v0.20.0"
    binary.write_bytes(b"no build info")
    with pytest.raises(kserve.KServeInstallError, match=r"no github\.com/kserve/kserve module"):
        kserve.manager_version(binary)


def test_with_kserve_one_worker_without_gpus_or_taint_comes_after_the_gpu_workers() -> None:
    nodes = kind_config(KindSpec("v1.36.3", kserve=True))["nodes"]
    assert [n["role"] for n in nodes] == ["control-plane", "worker", "worker"]
    assert nodes[-1] == {"role": "worker"}
    assert kind_config(KindSpec("v1.36.3"))["nodes"][1:] == nodes[1:2]

"""The reference program: what a person writes with pulumi-kubernetes for the same objects.

One explicit provider (server-side apply on), and each rendered object registered as the
resource of its kind, with no component, no preflight, no validation and no outputs. It reads
the objects from the file ``INFERCRANE_NAIVE_OBJECTS`` names (written by ``naive``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from infercrane_pulumi.objects.workloads import KINDS

OBJECTS_ENV = "INFERCRANE_NAIVE_OBJECTS"
CONTEXT_ENV = "INFERCRANE_NAIVE_CONTEXT"
NAMESPACE_ENV = "INFERCRANE_NAIVE_NAMESPACE"


def main() -> None:
    objects = json.loads(Path(os.environ[OBJECTS_ENV]).read_text(encoding="utf-8"))
    provider = k8s.Provider(
        "kubernetes",
        context=os.environ[CONTEXT_ENV],
        namespace=os.environ[NAMESPACE_ENV],
        enable_server_side_apply=True,
    )
    options = pulumi.ResourceOptions(provider=provider)
    for obj in objects:
        name = f"{obj['metadata']['name']}-{obj['kind'].lower()}"
        pulumi.CustomResource(KINDS[obj["kind"]].pulumi_type, name, obj, options)

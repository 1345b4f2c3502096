"""The InferCrane control plane's side: desired intents in, per-key results and states out.

Run it against a namespace bootstrapped from deploy/kubernetes (e.g. a kept demo cluster):

    KUBECONFIG=... INFERCRANE_CONTEXT=infercrane-provider INFERCRANE_NAMESPACE=team-a \
    PULUMI_BACKEND_URL=file:///var/lib/infercrane/state PULUMI_CONFIG_PASSPHRASE=... \
    INFERCRANE_TOOLS_BIN=$(hack/tools/build.sh --bin-dir) python -m examples.control_plane

Any DIY backend: ``file://``, ``postgres://`` (its own database holds the stack leases), or
another shared one (``s3://`` ...) with ``INFERCRANE_LEASE_URL`` naming the PostgreSQL for them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from infercrane_pulumi.automation import (
    EnvironmentFlags,
    NamespaceStack,
    ensure_many,
    resolve_environment,
)
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.errors import InferCraneError


def main() -> int:
    try:
        # The command line's own resolution of the documented variables (the backend, its
        # lease database, the passphrase, the tools, the kubeconfig); one line if one is wrong.
        env = resolve_environment(EnvironmentFlags(), os.environ)
    except InferCraneError as error:
        print(f"{error.code}: {error}", file=sys.stderr)
        return 2
    settings = KubernetesSettings(
        context=os.environ["INFERCRANE_CONTEXT"],
        namespace=os.environ["INFERCRANE_NAMESPACE"],
        image_digest="registry.example/vllm/vllm-openai@sha256:" + "6d" * 32,
    )
    # One stack per namespace; each process its own workspace (the state and lock are shared).
    stack = NamespaceStack(settings, env, Path("/tmp/infercrane-workspace"), wait_seconds=30)
    intents = [
        ReplicaIntent(external_key="dep-7-r0", model="Qwen/Qwen3-8B", gpu="NVIDIA-L40S"),
        ReplicaIntent(external_key="dep-7-r1", model="Qwen/Qwen3-8B", gpu="NVIDIA-L4"),
    ]
    try:
        applied = stack.ensure(intents)  # exactly these intents in the namespace, nothing else
        for replica in applied.replicas:
            print(replica.external_key, replica.change, replica.resource_id, replica.endpoint)
        for (
            seen
        ) in stack.observe():  # fresh from the cluster: ready means the current intent serves
            print(seen.external_key, seen.state, seen.reason)
        removed = stack.remove("dep-7-r1")
        print([(r.external_key, r.change) for r in removed.replicas])
        outcomes = ensure_many({settings.namespace: (stack, intents[:1])}, parallel=4)
        print(
            {
                namespace: o.error or (o.result and o.result.summary)
                for namespace, o in outcomes.items()
            }
        )
        stack.destroy()
    except InferCraneError as error:
        # retryable: the cluster is unreachable or another run holds the stack; call again later.
        print(f"{error.code} (retryable={error.retryable}): {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

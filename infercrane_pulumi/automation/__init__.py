"""The Automation API: how the InferCrane control plane, the demo and the tests drive stacks.

The only importer of ``pulumi.automation``. ``NamespaceStack`` is the control plane's door:
desired intents in, per-key results out. ``open_stack`` with ``preview``/``up``/``destroy``
drive a project's stack files, as ``pulumi up`` users do. Both run the same program through
the same path (``stacks.run``): refresh first, the program's refusals decoded into typed
errors, a busy stack reported as retryable, and recovery from a run that died.
"""

from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.locks import stack_locks
from infercrane_pulumi.automation.namespaces import NamespaceOutcome, NamespaceStack, ensure_many
from infercrane_pulumi.automation.recovery import recover
from infercrane_pulumi.automation.results import ReplicaChange, StackResult
from infercrane_pulumi.automation.stacks import destroy, open_stack, preview, up

__all__ = [
    "NamespaceOutcome",
    "NamespaceStack",
    "PulumiEnvironment",
    "ReplicaChange",
    "StackResult",
    "destroy",
    "ensure_many",
    "open_stack",
    "preview",
    "recover",
    "stack_locks",
    "up",
]

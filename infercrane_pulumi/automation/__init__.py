"""The Automation API: how the InferCrane control plane, the demo and the tests drive stacks.

The only importer of ``pulumi.automation``. It runs the same program as ``pulumi up`` (a
project's ``__main__.py`` through the Python language host), always refreshes first so drift
is visible, decodes the program's refusals from the refusal channel into typed errors, and
recovers by itself from a run that died.
"""

from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.locks import stack_locks
from infercrane_pulumi.automation.recovery import recover
from infercrane_pulumi.automation.stacks import destroy, open_stack, preview, up

__all__ = [
    "PulumiEnvironment",
    "destroy",
    "open_stack",
    "preview",
    "recover",
    "stack_locks",
    "up",
]

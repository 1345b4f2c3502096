"""The Automation API: how the InferCrane control plane, the command line, the demo and the tests
drive stacks.

The only importer of ``pulumi.automation``. ``NamespaceStack`` is the control plane's door:
desired intents in, per-key results out. ``run_stack_file`` drives a project's stack files, as
the command line does. Both go through the one run path (``run.run``): one snapshot of the
namespace for drift and ownership, the strict dry-run, the program's refusals decoded into
typed errors, a busy stack reported as retryable, and recovery from a run that died. On a
shared backend (PostgreSQL, or S3 with a lease database) every run holds its stack's lease
(``leases``), so several replicas on several hosts can run the same stacks.
"""

from infercrane_pulumi.automation.engine import stack_locks
from infercrane_pulumi.automation.environment import (
    EnvironmentFlags,
    PulumiEnvironment,
    resolve_environment,
)
from infercrane_pulumi.automation.namespaces import NamespaceOutcome, NamespaceStack, ensure_many
from infercrane_pulumi.automation.planning import Operation
from infercrane_pulumi.automation.policypack import PolicyPack
from infercrane_pulumi.automation.results import StackResult
from infercrane_pulumi.automation.run import RunOptions
from infercrane_pulumi.automation.stackfiles import inspect_stack_file, run_stack_file
from infercrane_pulumi.automation.stacks import applied, open_stack

__all__ = [
    "EnvironmentFlags",
    "NamespaceOutcome",
    "NamespaceStack",
    "Operation",
    "PolicyPack",
    "PulumiEnvironment",
    "RunOptions",
    "StackResult",
    "applied",
    "ensure_many",
    "inspect_stack_file",
    "open_stack",
    "resolve_environment",
    "run_stack_file",
    "stack_locks",
]

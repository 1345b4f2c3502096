"""Recovery from a run that died: safe because every object is re-applied idempotently.

Only when a lock of this stack belongs to a process that is gone from this host, and no live
operation holds the stack, is the lock cancelled and the interrupted operations cleared; the
next run then re-applies under names derived from durable keys, so nothing is duplicated. A
lock held from another machine is never broken here: that stack is reported busy instead,
unless the backend has stack leases (``leases``): under the stack's lease any lock is stale,
and ``run`` breaks it with ``break_locks``.
"""

from __future__ import annotations

from pulumi import automation as auto

from infercrane_pulumi.automation.engine import stack_locks
from infercrane_pulumi.automation.environment import PulumiEnvironment


def recover(stack: auto.Stack, env: PulumiEnvironment) -> list[str]:
    """Undo what a dead run left behind; returns what was done, for the caller's log."""
    locks = stack_locks(env.local_state, stack.name)
    if not locks or not all(lock.stale for lock in locks):
        return []
    return break_locks(stack, f"{len(locks)} stale lock(s) of dead process(es)")


def break_locks(stack: auto.Stack, which: str) -> list[str]:
    """Cancel the stack's locks (``which``: why they are known stale) and clear the
    interrupted operations; only for locks no live operation holds."""
    stack.cancel()
    done = [f"cancelled {which}"]
    exported = stack.export_stack()
    deployment = dict(exported.deployment or {})
    pending = deployment.get("pending_operations")
    if pending:
        deployment["pending_operations"] = []
        stack.import_stack(auto.Deployment(version=exported.version, deployment=deployment))
        done.append(f"cleared {len(pending)} interrupted operation(s); the next run re-applies")
    return done

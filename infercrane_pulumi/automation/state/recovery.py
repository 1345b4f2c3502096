"""Recovery from a run that died: safe because every object is re-applied idempotently.

A lock is broken only on proof that its holder is gone, and the proof decides how:

- The file backend (``recover``, before every attempt without a lease): a lock whose process
  is gone from this host (``engine.locks``). Only when every lock of the stack is such, exactly
  the lock files read are deleted, under a lock of our own in the CLI's layout: while it is
  there, a CLI that wants the stack finds it locked and backs off, so nobody writes the state
  while its interrupted operations are cleared. A lock taken after our look (another driver
  that recovered first and runs now) is never deleted, and then the state is its holder's and
  left alone. A run killed while the engine wrote the state can leave the checkpoint's blob
  attributes torn, which every later CLI refuses to read: they are removed then too
  (``engine.drop_torn_attributes``). ``pulumi cancel`` is no tool for this: it deletes every
  lock of the stack, including one taken after the look. A lock held from another machine is
  never broken: that stack is busy.
- Under the stack's lease (``break_fenced``, shared backends: ``run``): holding the lease proves
  that no live replica holds the stack, once the lease's fence has passed, and the lease records
  every engine its holders started (``leases``). The stack's locks are read one by one from the
  backend's own store (``blobs``): exactly those of such an engine (or of a process gone from
  this host) are deleted; a lock of any other holder (a person's ``pulumi up`` on the same
  backend, which takes no lease) is never broken, and the stack is busy (``StackBusyError``).
  Nobody that takes the lease can race the export and import that clear the interrupted
  operations. Where the backend has no store here (``gs://``, ``azblob://``), its locks cannot
  be read, and the CLI cancels them all (``break_locks``; docs/explanation/limitations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pulumi import automation as auto

from infercrane_pulumi.automation import engine, project
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.state import blobs
from infercrane_pulumi.errors import BackendUnavailableError, ConfigError, StackBusyError


def recover(env: PulumiEnvironment, stack_name: str) -> list[str]:
    """Undo what a dead run left behind on the file backend; returns what was done, for the
    caller's log."""
    state_dir = env.local_state
    read = engine.stack_locks(state_dir, stack_name)
    if state_dir is None or not read or not all(lock.stale for lock in read):
        return []
    return break_stale(state_dir, stack_name, read)


def break_stale(state_dir: Path, stack_name: str, stale: Sequence[engine.Lock]) -> list[str]:
    """Delete exactly the ``stale`` locks (read, and found stale, by the caller) under a lock of
    our own, then clear the interrupted operations if no other holder came meanwhile."""
    try:
        with engine.own_lock(state_dir, stack_name) as ours:
            for lock in stale:
                engine.remove_lock(lock)
            done = [f"broke {len(stale)} stale lock(s) of dead process(es)"]
            # Read after ours was in place: a CLI that looked before then saw the stale locks
            # and backed off, and any lock written since then is its holder's.
            taken = [
                lock for lock in engine.stack_locks(state_dir, stack_name) if lock.path != ours
            ]
            if taken:
                return [*done, f"left the state to {taken[0].holder}, which took the stack since"]
            if engine.drop_torn_attributes(state_dir, project.PROJECT_NAME, stack_name):
                done.append("removed the checkpoint's attributes a killed write left torn")
            cleared = engine.clear_pending_operations(state_dir, project.PROJECT_NAME, stack_name)
    except OSError as error:
        raise BackendUnavailableError(
            f"stack {stack_name}: could not change its lock files or state in {state_dir} "
            f"({error.strerror})"
        ) from error
    if cleared is None:
        return [
            *done,
            "left any interrupted operations: a checkpoint form this reader does not know",
        ]
    if cleared:
        done.append(f"cleared {cleared} interrupted operation(s); the next run re-applies")
    return done


def break_fenced(
    env: PulumiEnvironment, stack: auto.Stack, engines: frozenset[tuple[str, int]]
) -> list[str]:
    """Under the stack's lease, after its fence: delete exactly the stack's locks of fenced
    ``engines`` (or of processes gone from this host) and clear the interrupted operations;
    ``StackBusyError`` for a lock of any other holder, which is left as it is."""
    try:
        store = blobs.opened(env)
    except ConfigError:
        store = None  # an S3 backend without keys here: its locks cannot be read
    if store is None:
        return break_locks(stack, "every lock (this backend's cannot be read one by one)")
    keys = store.keys([engine.lock_prefix(stack.name)])
    read = [(key, store.read(key)) for key in keys if key.endswith(".json")]
    locks = {key: engine.lock_blob(Path(key), raw) for key, raw in read if raw is not None}
    alive = [lock for lock in locks.values() if not lock.fenced(engines)]
    if alive:
        raise StackBusyError(
            f"stack {stack.name}: its lock is held by {alive[0].holder}, which no lease holder "
            "started (a person's pulumi run?); it is never broken: retry once it has ended"
        )
    store.delete(sorted(locks))
    return [f"deleted {len(locks)} lock(s) of fenced engines", *_cleared(stack)]


def break_locks(stack: auto.Stack, which: str) -> list[str]:
    """Cancel every lock of the stack (``which``) and clear the interrupted operations; only
    under the stack's lease, after its fence, where the locks cannot be read (see above)."""
    stack.cancel()
    return [f"cancelled {which}", *_cleared(stack)]


def _cleared(stack: auto.Stack) -> list[str]:
    done = []
    exported = stack.export_stack()
    deployment = dict(exported.deployment or {})
    pending = deployment.get("pending_operations")
    if pending:
        deployment["pending_operations"] = []
        stack.import_stack(auto.Deployment(version=exported.version, deployment=deployment))
        done.append(f"cleared {len(pending)} interrupted operation(s); the next run re-applies")
    return done

"""The one door to the Pulumi engine: how the CLI is started for an operation (``process``),
how the program is served to it (``serving``), how its events (``events``), its checkpoint
(``checkpoints``) and its locks (``locks``) are read, how much memory the CLI may hold
(``memory``), and one engine run put together (``operation``). Nothing else in the product
knows any of it; the rest of the run path talks to this package in the project's own types
(``Outcome``, ``Lock``, a stack's outputs as data).

Speed and safety lean here on behaviour Pulumi does not document. Each such contract (the
page docs/reference/engine-contracts.md holds the same table), what relies on it, and what
happens without it:

1. The SDK's public runtime (``pulumi.runtime``'s ``reset_options``, ``set_all_config``,
   ``run_in_stack``) and its generated gRPC code, of which ``serving`` makes the runtime it
   serves, and, where the SDK has it, the private function its registrations take their stack
   trace from, ``pulumi.runtime.resource._get_stack_trace``. Without that function a served
   run's resources carry the SDK's stack trace: more state, never a wrong answer.
2. ``pulumi up|preview|destroy --client ADDR --exec-kind auto.inline``, flags ``--help`` does
   not list but the SDK's own Automation API passes (``serving``), with ``ADDR`` a gRPC
   ``unix:PATH`` (the CLI dials it as any gRPC target). Without them every run fails
   (``pulumi-run-failed``).
3. ``--event-log FILE``, taken with ``PULUMI_DEBUG_COMMANDS=true``: one JSON engine event per
   line, appended as the engine works (``events``), for a run a person watches (else row 6).
   A line the SDK does not decode fails the run closed (``pulumi-unsupported``).
4. A step's event line begins ``{"sequence":…,"timestamp":…,"resourcePreEvent":{"metadata":
   {"op":"same","urn":…`` (or ``resOutputsEvent``): Go's field order
   (``events.known_same_step``). A line laid out otherwise is decoded in full: slower, never
   wrong.
5. A policy event's message begins with its rule's description and a newline
   (``events.policy_message``). Otherwise the description stays in the finding's message.
6. ``--json`` streams one event per line (``preview`` with
   ``PULUMI_ENABLE_STREAMING_JSON_PREVIEW=true``) and keeps none, encoded as row 3's log: with
   nobody watching, it is the run's event log (``process``). Otherwise the CLI's memory grows
   with the stack, as its human display's does; a line the SDK does not decode fails the run
   closed, as in row 3.
7. The CLI's words for a locked stack on stderr, which the SDK's ``create_command_error``
   classifies (``process``, ``operation``). Otherwise a busy stack fails as
   ``pulumi-run-failed`` instead of ``stack-busy``.
8. ``pulumi config set`` reads a value from stdin when stdin is no terminal and drops one
   trailing newline (``process.set_secret``). Otherwise the kubeconfig contents are not stored,
   and ``NamespaceStack`` fails in one line; never are they put in a command line.
9. The file backend's lock files ``.pulumi/locks/<org>/<project>/<stack>/<id>.json`` holding
   ``pid`` and ``hostname`` (``locks``). Any other file there is a lock of an unknown holder:
   the stack is busy (retryable), never free. Recovery writes its own lock there, which a
   CLI must take as a holder (it writes, then refuses if it sees another lock), and deletes
   exactly the stale ones it read. Otherwise a CLI could start while a lock is broken.
10. The file backend's checkpoint ``.pulumi/stacks/<project>/<stack>.json``, version 3 (or 4
    naming only the ``hooks`` feature, as the components' delete hook makes it), the
    root stack's outputs (``checkpoints``). Anything else is read by the CLI
    (``pulumi stack output``): one more process. Recovery empties its
    ``pending_operations`` in place, under its lock; in another form they stay (the engine
    warns of them and goes on).
11. InferCrane's own Python language host and the program share
    ``INFERCRANE_PULUMI_CONFIG_FILE`` and its JSON (``config``, ``secretKeys``), defined in
    ``program.py`` and in ``hack/tools/language-hosts/cmd/pulumi-language-python/main.go``.
    Otherwise a person's ``pulumi up`` reads its configuration from Pulumi's own variable (at
    most 128 KiB).
12. The DIY backends' history, backup and ``.bak`` names, kept in the backend itself, and the
    variables that turn backups off (``history``). A name in another layout is never
    deleted: the history grows as Pulumi's does.
13. A resource registered with an empty stack trace is kept in the checkpoint with none, nor
    a source position (``serving``). Otherwise the engine keeps what it is sent, and the state
    is as large as the SDK's own traces make it.

Where each row is proven (docs/reference/engine-contracts.md names each test):
``tests/conformance/test_engine_contracts.py`` proves rows 4 and 6 (by what the run did, never
by its time), 7, 9, 10, 11 and 13, and that an interrupted run ends with its engine; the
suite's tests of the paths that rely on rows 2, 3, 5, 8 and 9 prove those; all of them but row
11's (our own host) on each CLI the docs name (docs/how-to/install.md), with the SDK pinned in
``constraints.txt``. Row 1 is proven by ``tests/unit/test_sdk_contracts.py`` (the SDK's names).
"""

from infercrane_pulumi.automation.engine.checkpoints import (
    clear_pending_operations,
    drop_torn_attributes,
)
from infercrane_pulumi.automation.engine.checkpoints import components as state_components
from infercrane_pulumi.automation.engine.checkpoints import outputs as checkpoint_outputs
from infercrane_pulumi.automation.engine.events import Tail, policy_message
from infercrane_pulumi.automation.engine.locks import (
    Lock,
    lock_blob,
    lock_prefix,
    own_lock,
    remove_lock,
    stack_locks,
)
from infercrane_pulumi.automation.engine.memory import memory_limit
from infercrane_pulumi.automation.engine.operation import (
    EventHandler,
    Outcome,
    busy,
    cli_version,
    operate,
)
from infercrane_pulumi.automation.engine.process import Printer, Tracker, inherited, set_secret

__all__ = [
    "EventHandler",
    "Lock",
    "Outcome",
    "Printer",
    "Tail",
    "Tracker",
    "busy",
    "checkpoint_outputs",
    "clear_pending_operations",
    "cli_version",
    "drop_torn_attributes",
    "inherited",
    "lock_blob",
    "lock_prefix",
    "memory_limit",
    "operate",
    "own_lock",
    "policy_message",
    "remove_lock",
    "set_secret",
    "stack_locks",
    "state_components",
]

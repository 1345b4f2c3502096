"""Where a Pulumi run keeps its state, plugins and binaries; nothing comes from the shell.

Any DIY backend URL passes through (``file://`` by default, ``s3://``, ``postgres://``, ...).
A ``postgres://`` backend is also where its stacks' leases live (``leases``); any other backend
but a local directory must name a PostgreSQL database for them, because a run counts itself
alone only on proof: the stack's locks it reads (``engine.locks``: only a local directory's can
be read here) or the stack's lease. Passwords never stay in a URL: the engine reads them from
the variables its backend driver knows (``backends``).
How much of a stack's past the backend keeps is set here too (``kept_updates``,
``keep_backups``; ``retention`` enforces it).
``resolve_environment`` is the one place where flags and the documented environment variables
become a ``PulumiEnvironment`` (the command line's resolution).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from infercrane_pulumi.automation.engine import history
from infercrane_pulumi.automation.engine.process import LEASE_URL_ENV
from infercrane_pulumi.automation.state import backends
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.errors import ConfigError

DEFAULT_KEPT_UPDATES = 10
KEEP_ALL = "all"  # $INFERCRANE_KEPT_UPDATES: keep every update, as Pulumi does


@dataclass(frozen=True)
class PulumiEnvironment:
    # The file backend's directory, or None with another DIY ``backend_url``.
    state_dir: Path | None
    pulumi_home: Path
    passphrase: str = field(repr=False)
    bin_dir: Path | None = None
    # The kubeconfig of a stack whose settings name none (``kubeconfigs``): its runs hand it to
    # the program explicitly, never through a variable. A relative path is the caller's
    # working directory's, made absolute at construction (``kubeconfigs.given``).
    kubeconfig: Path | None = None
    backend_url: str | None = None  # never with a password in it
    # What the backend's driver reads from the environment: PGPASSWORD, S3 keys.
    backend_variables: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Where stack leases live: a postgres backend's own database, or one given for another
    # shared backend (required: see ``__post_init__``). None (only the file backend): no
    # lease; its locks are read here, and recovery is host-local (``recovery``).
    lease_database: backends.Database | None = None
    # The engine rewrites the whole state after every step unless told not to: O(N^2) bytes
    # per run (at 100 intents, first up 3.3x and destroy 2.2x slower). Skipping them keeps
    # only the final state; a run killed midway leaves the previous state, and the next run
    # re-applies by durable names and takes its own objects back (the preflight allows
    # exactly-ours objects), so nothing is duplicated. Objects created by the killed run and
    # removed from the intents before any successful run stay behind as ``orphaned``.
    skip_checkpoints: bool = True
    # How many of a stack's updates its history keeps (None: every one, as Pulumi does). Each
    # holds a whole copy of the checkpoint, so a stack stores at most this many plus one; older
    # ones are deleted after each successful update (``retention``). Ten: enough to read what
    # the last few rollout steps did (`pulumi stack history`) and to restore the state of
    # any of them by hand, at 11 checkpoints per stack (about 260 MB at 1,000 intents).
    kept_updates: int | None = DEFAULT_KEPT_UPDATES
    # Pulumi's own backup copies of the checkpoint (.pulumi/backups, <checkpoint>.bak):
    # another copy per update, never read back by anything; off unless asked for.
    keep_backups: bool = False

    def __post_init__(self) -> None:
        if (self.state_dir is None) == (self.backend_url is None):
            raise ValueError("give exactly one of state_dir (file backend) and backend_url")
        if self.kept_updates is not None and (
            isinstance(self.kept_updates, bool) or self.kept_updates < 0
        ):
            raise ValueError("kept_updates must be a count of updates (0 or more), or None")
        if self.backend_url is not None and self.backend_url != backends.redact(self.backend_url):
            raise ValueError("backend_url holds a password: use PulumiEnvironment.for_backend")
        # Without its locks in sight, a run would count itself alone while another replica
        # changes the stack: a verified no-op would answer for it, a destroy delete before the
        # engine takes its lock. Every way of building an environment comes through here.
        if not self.passphrase:
            raise ConfigError(
                "passphrase: empty; the stack's secrets (kubeconfig contents) would be "
                "encrypted under an empty key"
            )
        if self.local_state is None and self.lease_database is None:
            raise ConfigError(
                f"backend {self.backend}: its stack locks cannot be read from this process, so "
                "a run could not prove it holds a stack alone; give a PostgreSQL database for "
                "stack leases (lease_url=, --lease-url or $INFERCRANE_LEASE_URL)"
            )
        if self.kubeconfig is not None:
            object.__setattr__(self, "kubeconfig", kubeconfigs.given(self.kubeconfig))

    @classmethod
    def for_backend(
        cls, url: str, *, lease_url: str | None = None, **fields: Any
    ) -> PulumiEnvironment:
        """The environment for a backend URL; ``file://`` URLs keep their directory local. A
        ``postgres://`` URL's password moves to ``PGPASSWORD``, and its database holds the
        stacks' leases unless ``lease_url`` names another, as it must for any other backend
        but a local directory (``ConfigError`` otherwise)."""
        parsed = urlparse(url)
        lease = None if lease_url is None else backends.database(lease_url)
        if parsed.scheme == "file":
            return cls(state_dir=Path(unquote(parsed.path)), lease_database=lease, **fields)
        if not backends.is_postgres(url):
            return cls(state_dir=None, backend_url=url, lease_database=lease, **fields)
        state = backends.database(url)
        secret = {} if state.password is None else {"PGPASSWORD": state.password}
        given = fields.pop("backend_variables", {})
        return cls(
            state_dir=None,
            backend_url=state.url,
            lease_database=lease or state,
            backend_variables={**given, **secret},
            **fields,
        )

    @property
    def backend(self) -> str:
        if self.state_dir is not None:
            return self.state_dir.resolve().as_uri()
        assert self.backend_url is not None
        return self.backend_url

    @property
    def state_database(self) -> backends.Database | None:
        """The PostgreSQL database holding the state (None: another backend), whatever holds
        the stacks' leases: what the state's retention prunes."""
        if self.backend_url is None or not backends.is_postgres(self.backend_url):
            return None
        return backends.Database(self.backend_url, self.backend_variables.get("PGPASSWORD"))

    @property
    def local_state(self) -> Path | None:
        """The state directory when the backend is this machine's file system."""
        return self.state_dir

    def variables(self) -> dict[str, str]:
        variables = {
            "PULUMI_BACKEND_URL": self.backend,
            "PULUMI_CONFIG_PASSPHRASE": self.passphrase,
            "PULUMI_HOME": str(self.pulumi_home.resolve()),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Use the installed, version-pinned plugin, never a same-named binary on PATH.
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
        }
        variables.update(self.backend_variables)
        variables.update(history.variables(keep_backups=self.keep_backups))
        if self.skip_checkpoints:
            variables["PULUMI_SKIP_CHECKPOINTS"] = "true"
        if self.bin_dir is not None:
            variables["PATH"] = os.pathsep.join([str(self.bin_dir), os.environ.get("PATH", "")])
        return variables


@dataclass(frozen=True)
class EnvironmentFlags:
    """What a caller may give explicitly; each falls back to its environment variable."""

    backend_url: str | None = None  # $PULUMI_BACKEND_URL
    lease_url: str | None = None  # $INFERCRANE_LEASE_URL (a postgres backend is its own)
    passphrase_file: str | None = None  # $PULUMI_CONFIG_PASSPHRASE_FILE, $PULUMI_CONFIG_PASSPHRASE
    pulumi_home: str | None = None  # $PULUMI_HOME, else ~/.pulumi
    tools_bin: str | None = None  # $INFERCRANE_TOOLS_BIN, else `pulumi` on PATH


def resolve_environment(flags: EnvironmentFlags, environ: Mapping[str, str]) -> PulumiEnvironment:
    """The environment the flags, else the documented variables, describe; one ``ConfigError``
    naming everything missing or malformed. The kubeconfig is the one kubectl would read:
    ``$KUBECONFIG``, else ``~/.kube/config`` (``kubeconfigs.from_environment``). The state's
    retention: ``$INFERCRANE_KEPT_UPDATES`` (a count, or ``all``), ``$INFERCRANE_KEEP_BACKUPS``."""
    problems = []
    backend = flags.backend_url or environ.get("PULUMI_BACKEND_URL")
    if not backend:
        problems.append("no backend: pass --backend-url or set PULUMI_BACKEND_URL")
    passphrase_file = flags.passphrase_file or environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    passphrase = environ.get("PULUMI_CONFIG_PASSPHRASE")
    if passphrase_file:
        try:
            passphrase = Path(passphrase_file).read_text().rstrip("\n")
        except OSError as error:
            problems.append(f"--passphrase-file: cannot read ({error.strerror})")
    if passphrase is None and not passphrase_file:
        problems.append(
            "no passphrase: pass --passphrase-file or set PULUMI_CONFIG_PASSPHRASE(_FILE)"
        )
    kept_updates = environ.get("INFERCRANE_KEPT_UPDATES", str(DEFAULT_KEPT_UPDATES))
    if not (kept_updates == KEEP_ALL or kept_updates.isdigit()):
        problems.append("INFERCRANE_KEPT_UPDATES: a count of updates (0 or more), or all")
    keep_backups = environ.get("INFERCRANE_KEEP_BACKUPS", "false")
    if keep_backups not in ("true", "false"):
        problems.append("INFERCRANE_KEEP_BACKUPS: true or false")
    if problems or backend is None or passphrase is None:
        raise ConfigError(problems)
    bin_dir, pulumi_home = pulumi_paths(flags, environ)
    return PulumiEnvironment.for_backend(
        backend,
        lease_url=flags.lease_url or environ.get(LEASE_URL_ENV),
        pulumi_home=pulumi_home,
        passphrase=passphrase,
        bin_dir=bin_dir,
        kubeconfig=kubeconfigs.from_environment(environ),
        kept_updates=None if kept_updates == KEEP_ALL else int(kept_updates),
        keep_backups=keep_backups == "true",
    )


def pulumi_paths(flags: EnvironmentFlags, environ: Mapping[str, str]) -> tuple[Path | None, Path]:
    """The directory holding the Pulumi CLI runs use (None: the one on PATH), and their
    ``PULUMI_HOME``, where the plugin is installed."""
    tools = flags.tools_bin or environ.get("INFERCRANE_TOOLS_BIN")
    home = flags.pulumi_home or environ.get("PULUMI_HOME")
    return Path(tools) if tools else None, Path(home) if home else Path.home() / ".pulumi"

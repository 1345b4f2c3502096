"""Bounded state: which of a stack's history and backups go (a pure decision over key names),
the engine told to write no backups, and the stores a backend URL is pruned through."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from infercrane_pulumi.automation.engine import history
from infercrane_pulumi.automation.environment import (
    DEFAULT_KEPT_UPDATES,
    EnvironmentFlags,
    PulumiEnvironment,
    resolve_environment,
)
from infercrane_pulumi.automation.state import blobs, retention, s3
from infercrane_pulumi.automation.state.backends import Database
from infercrane_pulumi.errors import ConfigError

LAYOUT = history.Layout("infercrane", "team-a")
H = ".pulumi/history/infercrane/team-a/"
B = ".pulumi/backups/infercrane/team-a/"
CHECKPOINT = ".pulumi/stacks/infercrane/team-a.json"
LEASES = "postgres://leases@db.example/leases"  # every shared backend needs one


def update(stamp: int, suffix: str = "") -> list[str]:
    return [
        f"{H}team-a-{stamp}.checkpoint.json{suffix}",
        f"{H}team-a-{stamp}.history.json{suffix}",
    ]


# Stamps of different lengths: newer means a larger number, never a later name.
FIVE = [*update(900), *update(1000), *update(1100), *update(99), *update(12000)]
BACKUPS = [f"{B}team-a.1700000000000000000.json", f"{B}team-a.1700000000000000001.json.gz"]


@pytest.mark.parametrize(
    ("keys", "keep", "keep_backups", "doomed"),
    [
        # The oldest go, each update's record and checkpoint copy together.
        (FIVE, 3, False, sorted([*update(99), *update(900)])),
        (FIVE, 5, False, []),
        (FIVE, 10, False, []),
        (FIVE, 0, False, sorted(FIVE)),
        (FIVE, None, False, []),
        # A record without its checkpoint copy (a run killed while copying) is one update.
        ([*update(1), f"{H}team-a-2.history.json", *update(3)], 2, False, update(1)),
        # Compressed states: the same, with their suffix.
        ([*update(1, ".gz"), *update(2, ".zst")], 1, False, update(1, ".gz")),
        # Backups and the checkpoint's .bak go unless asked for; the checkpoint never does,
        # nor Pulumi's retained copies beside it.
        (
            [CHECKPOINT, f"{CHECKPOINT}.bak", f"{CHECKPOINT}.1700.json", *BACKUPS],
            None,
            False,
            sorted([f"{CHECKPOINT}.bak", *BACKUPS]),
        ),
        ([CHECKPOINT, f"{CHECKPOINT}.bak", *BACKUPS, *FIVE], 5, True, []),
        ([f"{CHECKPOINT}.gz", f"{CHECKPOINT}.gz.bak"], 1, False, [f"{CHECKPOINT}.gz.bak"]),
        # What is not in Pulumi's layout, or another stack's, is never named.
        (
            [
                f"{H}notes.txt",
                f"{H}team-a-x1.history.json",
                f"{H}team-b-1.history.json",
                f"{H}sub/team-a-1.history.json",
                ".pulumi/history/infercrane/team-a-b/team-a-b-1.history.json",
                f"{B}team-b.1.json",
                f"{B}team-a.json",
                ".pulumi/stacks/infercrane/team-ab.json.bak",
            ],
            0,
            False,
            [],
        ),
    ],
)
def test_surplus_keeps_the_newest_updates_and_never_the_checkpoint(
    keys: list[str], keep: int | None, keep_backups: bool, doomed: list[str]
) -> None:
    assert history.surplus(LAYOUT, keys, keep=keep, keep_backups=keep_backups) == doomed


def test_a_stack_named_like_a_stamp_is_read_by_its_own_name() -> None:
    layout = history.Layout("infercrane", "a-1")
    keys = [f".pulumi/history/infercrane/a-1/a-1-{stamp}.history.json" for stamp in (5, 6)]
    assert list(history.updates(layout, keys)) == [5, 6]
    assert history.surplus(layout, keys, keep=1, keep_backups=False) == keys[:1]


def env(tmp_path: Path, **fields: Any) -> PulumiEnvironment:
    return PulumiEnvironment(
        state_dir=tmp_path / "state", pulumi_home=tmp_path / "home", passphrase="p", **fields
    )


def test_the_engine_writes_no_backups_unless_asked(tmp_path: Path) -> None:
    default = env(tmp_path)
    assert default.kept_updates == DEFAULT_KEPT_UPDATES
    assert default.variables() | history.variables(keep_backups=False) == default.variables()
    assert default.variables()["PULUMI_DIY_BACKEND_DISABLE_CHECKPOINT_BACKUPS"] == "true"
    assert default.variables()["PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS"] == "false"
    asked = env(tmp_path, keep_backups=True).variables()
    assert not {history.DISABLE_BACKUPS, history.RETAIN_CHECKPOINTS} & set(asked)


@pytest.mark.parametrize("kept", [-1, True])
def test_a_retention_that_is_no_count_is_refused(tmp_path: Path, kept: object) -> None:
    with pytest.raises(ValueError, match="kept_updates"):
        env(tmp_path, kept_updates=kept)


def test_a_directory_is_pruned_of_old_updates_and_backups_and_their_attributes(
    tmp_path: Path,
) -> None:
    found = env(tmp_path, kept_updates=2)
    root = tmp_path / "state"
    kept = [CHECKPOINT, *update(3), *update(4), f"{H}notes.txt"]
    gone = [f"{CHECKPOINT}.bak", *BACKUPS, *update(1), *update(2), f"{BACKUPS[0]}.attrs"]
    for key in [*kept, *gone]:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(key)
    store = retention.store(found)
    assert store is not None
    deleted = retention.prune(store, "team-a", found)
    assert deleted == sorted(key for key in gone if not key.endswith(".attrs"))
    remaining = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert remaining == sorted(kept)


def test_a_backend_that_keeps_everything_needs_no_store(tmp_path: Path) -> None:
    assert retention.store(env(tmp_path, kept_updates=None, keep_backups=True)) is None


def test_a_backend_without_a_store_here_is_left_to_pulumi(tmp_path: Path) -> None:
    for url in ("gs://bucket/prefix", "azblob://container"):
        found = PulumiEnvironment.for_backend(
            url, lease_url=LEASES, pulumi_home=tmp_path, passphrase="p"
        )
        assert retention.store(found) is None


def test_an_s3_backend_without_keys_is_refused_unless_every_update_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    url = "s3://state?region=us-east-1"
    bounded = PulumiEnvironment.for_backend(
        url, lease_url=LEASES, pulumi_home=tmp_path, passphrase="p"
    )
    with pytest.raises(ConfigError) as raised:
        retention.store(bounded)
    assert raised.value.problems == (
        "backend s3://state: pruning its history needs AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY in the environment (profiles and instance roles are not read); "
        f"or keep every update ({retention.KEEP_ALL_HINT})",
    )
    unbounded = dataclasses.replace(bounded, kept_updates=None)
    assert retention.store(unbounded) is None


def test_an_s3_url_is_read_as_the_engine_reads_it() -> None:
    keys = {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "secret"}
    found = s3.bucket(
        "s3://state/team/?endpoint=http://127.0.0.1:9000&region=eu-west-1&use_path_style=true",
        keys,
    )
    assert (found.name, found.prefix, found.region, found.path_style) == (
        "state",
        "team/",
        "eu-west-1",
        True,
    )
    assert found.endpoint.netloc == "127.0.0.1:9000"
    assert "secret" not in repr(found)
    aws = s3.bucket("s3://state", keys | {"AWS_REGION": "us-west-2"})
    assert (aws.prefix, aws.endpoint.netloc, aws.path_style) == (
        "",
        "s3.us-west-2.amazonaws.com",
        False,
    )


def test_an_s3_backend_without_keys_in_the_environment_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as raised:
        s3.bucket("s3://state?region=us-east-1", {"AWS_SECRET_ACCESS_KEY": "secret"})
    assert len(raised.value.problems) == 1
    assert "secret" not in str(raised.value)


BASE = {"PULUMI_BACKEND_URL": "file:///state", "PULUMI_CONFIG_PASSPHRASE": "p"}


@pytest.mark.parametrize(
    ("given", "kept", "backups"),
    [
        ({}, DEFAULT_KEPT_UPDATES, False),
        ({"INFERCRANE_KEPT_UPDATES": "3", "INFERCRANE_KEEP_BACKUPS": "true"}, 3, True),
        ({"INFERCRANE_KEPT_UPDATES": "0"}, 0, False),
        ({"INFERCRANE_KEPT_UPDATES": "all"}, None, False),
    ],
)
def test_the_command_line_takes_the_retention_from_its_variables(
    given: dict[str, str], kept: int | None, backups: bool
) -> None:
    found = resolve_environment(EnvironmentFlags(), BASE | given)
    assert (found.kept_updates, found.keep_backups) == (kept, backups)


def test_a_malformed_retention_is_one_line_each() -> None:
    wrong = {"INFERCRANE_KEPT_UPDATES": "-1", "INFERCRANE_KEEP_BACKUPS": "yes"}
    with pytest.raises(ConfigError) as raised:
        resolve_environment(EnvironmentFlags(), BASE | wrong)
    assert raised.value.problems == (
        "INFERCRANE_KEPT_UPDATES: a count of updates (0 or more), or all",
        "INFERCRANE_KEEP_BACKUPS: true or false",
    )


def test_a_postgres_state_is_pruned_in_its_own_database_whatever_holds_its_leases(
    tmp_path: Path,
) -> None:
    """With leases given a database of their own, the state's history was pruned (and probed)
    there: another state's rows, or none."""
    found = PulumiEnvironment.for_backend(
        "postgres://state@db.internal/control?sslmode=require",
        lease_url="postgres://leases:lease-pw@leases.internal/leases",
        pulumi_home=tmp_path,
        passphrase="p",
        backend_variables={"PGPASSWORD": "state-pw"},
    )
    store = retention.store(found)
    assert isinstance(store, blobs.Table)
    assert store.database == Database(
        "postgres://state@db.internal/control?sslmode=require", "state-pw"
    )
    assert found.lease_database == Database(
        "postgres://leases@leases.internal/leases?sslmode=require", "lease-pw"
    )


def test_an_empty_passphrase_is_refused_in_one_line() -> None:
    """The state's secrets would be encrypted under an empty key."""
    with pytest.raises(ConfigError) as refused:
        resolve_environment(EnvironmentFlags(), BASE | {"PULUMI_CONFIG_PASSPHRASE": ""})
    assert refused.value.problems == (
        "passphrase: empty; the stack's secrets (kubeconfig contents) would be encrypted under "
        "an empty key",
    )

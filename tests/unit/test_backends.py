"""Backend URLs as values: the password kept out of every URL the engine, a log or an error
sees; malformed URLs refused in one line each; one lease key per backend and stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from infercrane_pulumi.automation import EnvironmentFlags, PulumiEnvironment, resolve_environment
from infercrane_pulumi.automation.state import backends
from infercrane_pulumi.errors import ConfigError

SECRET = "s3cr:t@/x"  # characters a URL must escape
URL = "postgres://infercrane:s3cr%3At%40%2Fx@db.internal:5432/control?sslmode=require"


def test_a_database_url_keeps_its_password_apart() -> None:
    database = backends.database(URL)
    assert database == backends.Database(
        url="postgres://infercrane@db.internal:5432/control?sslmode=require", password=SECRET
    )
    assert SECRET not in repr(database)
    assert database.table == "pulumi_state"
    assert database.conninfo == database.url


def test_pulumis_table_parameter_is_not_given_to_libpq() -> None:
    database = backends.database("postgres://u@h/db?table=infra.state&sslmode=disable")
    assert (database.table, database.conninfo) == (
        "infra.state",
        "postgres://u@h/db?sslmode=disable",
    )


@pytest.mark.parametrize(
    ("url", "problems"),
    [
        (
            "postgresql://u:pw@h/db",
            ["backend URL postgresql://u:***@h/db: the scheme must be postgres://"],
        ),
        (
            "postgres://u:pw@h:99999/db",
            ["backend URL postgres://u:***@h:99999/db: not a valid URL (host or port)"],
        ),
        ("postgres://u:pw@/db", ["backend URL postgres://u:***@/db: no host"]),
        (
            "postgres://u:pw@h/",
            ["backend URL postgres://u:***@h/: no database (postgres://user@host/<database>)"],
        ),
        (
            "postgres://u:pw@h/db?table=x;drop",
            ["backend URL postgres://u:***@h/db?table=x;drop: table must be an SQL identifier"],
        ),
        (
            "postgres://u:pw@h/db?sslmode=prefer",
            [
                "backend URL postgres://u:***@h/db?sslmode=prefer: sslmode=prefer may send the "
                "password and the state in plain text; give one of verify-full, verify-ca, "
                "require, disable (disable only on purpose)"
            ],
        ),
    ],
)
def test_a_malformed_database_url_is_refused_without_its_password(
    url: str, problems: list[str]
) -> None:
    with pytest.raises(ConfigError) as refused:
        backends.database(url)
    assert list(refused.value.problems) == problems


def test_a_unix_socket_url_names_its_host_as_a_parameter() -> None:
    found = backends.database("postgres://u@/db?host=/run/postgresql")
    assert (found.url, found.password) == ("postgres://u@/db?host=/run/postgresql", None)


@pytest.mark.parametrize(
    ("url", "used"),
    [
        # Unsaid: libpq (the lease's) would have preferred TLS and fallen back to plain text.
        ("postgres://u:pw@db/state", "postgres://u@db/state?sslmode=require"),
        ("postgres://u@db/state?table=t", "postgres://u@db/state?table=t&sslmode=require"),
        ("postgres://u@db/state?sslmode=disable", "postgres://u@db/state?sslmode=disable"),
        (
            "postgres://u@db/state?sslmode=verify-full&sslrootcert=/ca.crt",
            "postgres://u@db/state?sslmode=verify-full&sslrootcert=/ca.crt",
        ),
    ],
)
def test_tls_is_required_unless_a_url_says_otherwise(url: str, used: str) -> None:
    assert backends.database(url).url == used


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (URL, "postgres://infercrane:***@db.internal:5432/control?sslmode=require"),
        ("s3://bucket/prefix?region=eu-west-1", "s3://bucket/prefix?region=eu-west-1"),
        ("file:///var/state", "file:///var/state"),
    ],
)
def test_redact(url: str, shown: str) -> None:
    assert backends.redact(url) == shown


def test_one_lease_key_per_backend_and_stack_whatever_the_host_spelling() -> None:
    key = backends.lease_key("postgres://u@db.internal/control", "team-a")
    assert key == backends.lease_key("postgres://u@10.0.0.5:5432/control?sslmode=require", "team-a")
    assert key != backends.lease_key("postgres://u@db.internal/control", "team-b")
    assert key != backends.lease_key("postgres://u@db.internal/control?table=other", "team-a")
    s3 = backends.lease_key("s3://bucket/prefix?endpoint=http://a", "team-a")
    assert s3 == backends.lease_key("s3://bucket/prefix?endpoint=http://b", "team-a")
    assert s3 != backends.lease_key("s3://bucket/other", "team-a")
    assert -(2**63) <= key < 2**63


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("s3://bucket/prefix", "s3://bucket/prefix/"),
        ("s3://bucket/prefix", "s3://Bucket//prefix"),
        ("s3://bucket/prefix", "S3://user@bucket/prefix?region=eu-west-1"),
        ("gs://bucket", "gs://bucket/"),
        ("postgres://u@db/control?table=State", "postgres://u@db/control?table=state"),
    ],
)
def test_one_lease_per_state_whatever_the_urls_spelling(one: str, other: str) -> None:
    """Two spellings of one state once gave two leases, and each holder broke the other's
    live lock."""
    assert backends.lease_key(one, "team-a") == backends.lease_key(other, "team-a")


def test_a_postgres_environment_gives_the_engine_its_password_as_a_variable(
    tmp_path: Path,
) -> None:
    env = PulumiEnvironment.for_backend(URL, pulumi_home=tmp_path, passphrase="p")
    variables = env.variables()
    assert variables["PULUMI_BACKEND_URL"] == backends.database(URL).url
    assert variables["PGPASSWORD"] == SECRET
    assert env.lease_database == backends.database(URL)
    assert SECRET not in repr(env) and "s3cr" not in variables["PULUMI_BACKEND_URL"]


def test_the_urls_password_joins_the_backend_variables_given(tmp_path: Path) -> None:
    env = PulumiEnvironment.for_backend(
        URL, pulumi_home=tmp_path, passphrase="p", backend_variables={"PGSSLMODE": "require"}
    )
    assert env.backend_variables == {"PGSSLMODE": "require", "PGPASSWORD": SECRET}


def test_other_shared_backends_take_their_lease_database_apart(tmp_path: Path) -> None:
    env = PulumiEnvironment.for_backend(
        "s3://state?region=us-east-1", lease_url=URL, pulumi_home=tmp_path, passphrase="p"
    )
    assert (env.backend, env.lease_database) == (
        "s3://state?region=us-east-1",
        backends.database(URL),
    )
    assert "PGPASSWORD" not in env.variables()  # the engine never talks to the lease database
    assert (
        PulumiEnvironment.for_backend(
            tmp_path.as_uri(), pulumi_home=tmp_path, passphrase="p"
        ).lease_database
        is None
    )


def test_a_password_in_a_backend_url_given_directly_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds a password"):
        PulumiEnvironment(state_dir=None, backend_url=URL, pulumi_home=tmp_path, passphrase="p")


LEASES = "postgres://infercrane:s3cr%3At%40%2Fx@db.internal:5432/leases"
# A run counts itself alone only on proof: the locks it reads (a local directory's) or a lease.
BLIND = (
    "backend {}: its stack locks cannot be read from this process, so a run could not prove "
    "it holds a stack alone; give a PostgreSQL database for stack leases (lease_url=, "
    "--lease-url or $INFERCRANE_LEASE_URL)"
)


@pytest.mark.parametrize(
    ("url", "lease_url", "refused"),
    [
        ("file:///var/lib/state", None, None),
        ("file:///var/lib/state", LEASES, None),
        (URL, None, None),  # its own database holds the leases
        (URL, LEASES, None),
        ("s3://state?region=eu-west-1", None, "s3://state?region=eu-west-1"),
        ("s3://state?region=eu-west-1", LEASES, None),
        ("gs://state", None, "gs://state"),
        ("azblob://state", None, "azblob://state"),
        ("azblob://state", LEASES, None),
    ],
)
def test_a_backend_whose_locks_are_not_read_here_needs_a_lease(
    tmp_path: Path, url: str, lease_url: str | None, refused: str | None
) -> None:
    def build() -> PulumiEnvironment:
        return PulumiEnvironment.for_backend(
            url, lease_url=lease_url, pulumi_home=tmp_path, passphrase="p"
        )

    if refused is None:
        env = build()
        assert (env.local_state is not None) or (env.lease_database is not None)
        return
    with pytest.raises(ConfigError) as caught:
        build()
    assert caught.value.problems == (BLIND.format(refused),)
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"state_dir": Path("/var/lib/state")}, None),
        ({"state_dir": None, "backend_url": "s3://state"}, "s3://state"),
        ({"state_dir": None, "backend_url": "postgres://u@h/db"}, "postgres://u@h/db"),
        # A local directory's locks are read only when it is given as one (for_backend does).
        ({"state_dir": None, "backend_url": "file:///var/lib/state"}, "file:///var/lib/state"),
        (
            {
                "state_dir": None,
                "backend_url": "s3://state",
                "lease_database": backends.database(LEASES),
            },
            None,
        ),
    ],
    ids=["file", "s3", "postgres without its database", "file as a URL", "s3 with leases"],
)
def test_the_same_rule_holds_for_an_environment_built_directly(
    tmp_path: Path, fields: dict[str, Any], refused: str | None
) -> None:
    if refused is None:
        PulumiEnvironment(pulumi_home=tmp_path, passphrase="p", **fields)
        return
    with pytest.raises(ConfigError) as caught:
        PulumiEnvironment(pulumi_home=tmp_path, passphrase="p", **fields)
    assert caught.value.problems == (BLIND.format(refused),)


@pytest.mark.parametrize("lease", [None, LEASES], ids=["without lease", "with lease"])
def test_the_command_lines_resolution_takes_the_rule_too(lease: str | None) -> None:
    environ = {"PULUMI_BACKEND_URL": "s3://state", "PULUMI_CONFIG_PASSPHRASE": "p"}
    if lease is None:
        with pytest.raises(ConfigError) as caught:
            resolve_environment(EnvironmentFlags(), environ)
        assert caught.value.problems == (BLIND.format("s3://state"),)
        return
    env = resolve_environment(EnvironmentFlags(), environ | {"INFERCRANE_LEASE_URL": lease})
    assert env.lease_database == backends.database(lease)
    # The lease database's password reaches no message of the refusal above, nor the repr.
    assert SECRET not in repr(env)


# Every character a person may put in a password, the URL's reserved ones first.
PASSWORDS = st.text(
    alphabet=st.sampled_from("#/?@:%&=+ ;[]") | st.characters(min_codepoint=33, max_codepoint=126),
    min_size=6,
    max_size=24,
)
URL_FORMS = (
    "postgres://infercrane:{pw}@db.internal:5432/control?sslmode=require",
    "postgres://infercrane@db.internal/control?password={pw}",
    "postgres://infercrane@db.internal/control?sslmode=require&sslpassword={pw}&table=state",
    "s3://AKIA:{pw}@bucket/prefix?region=eu-west-1",
)


@settings(deadline=None)  # a loaded machine's pause is no failure
@given(password=PASSWORDS, form=st.sampled_from(URL_FORMS))
def test_no_password_survives_redaction_whatever_its_characters(password: str, form: str) -> None:
    """``postgres://u:Xy#9kq@host/db`` (a ``#``, ``/`` or ``?`` in an unencoded password) and
    ``?password=`` were printed whole."""
    url = form.format(pw=password)
    assume(password not in form.format(pw=backends.REDACTED))
    assert password not in backends.redact(url)
    if form.startswith("postgres"):
        try:
            backends.database(url)
        except ConfigError as refused:
            assert all(password not in line for line in refused.problems)


def test_a_password_in_the_query_is_moved_out_of_the_url_as_one_in_the_userinfo() -> None:
    found = backends.database("postgres://u@db/control?sslmode=require&password=p%26w")
    assert (found.url, found.password) == ("postgres://u@db/control?sslmode=require", "p&w")

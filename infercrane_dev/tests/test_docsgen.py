"""The generated reference: whatever the code declares (a field, an error code, a command)
appears in the pages without anyone writing it. Pages are built from values given here."""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field

from infercrane_dev import docsgen
from infercrane_pulumi import errors
from infercrane_pulumi.cli import commands, views
from infercrane_pulumi.config import intents


def _row(page: str, first_cell: str) -> list[str]:
    """The cells of the table row whose first cell is ``first_cell``."""
    [line] = [line for line in page.splitlines() if line.startswith(f"| {first_cell} |")]
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def _section(page: str, heading: str) -> str:
    """The text under ``## heading``, up to the next section."""
    return page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


class _WithExtraField(intents.StackConfig):
    """A stack config with one field more than the real one."""

    gpu_quota_hours: int = Field(default=12, ge=1, description="hours of GPU a day")


class _SettingsPlus(intents.KubernetesSettings):
    node_pool: str | None = None


class _NestedExtra(BaseModel):
    kubernetes: _SettingsPlus


def test_a_field_added_to_a_model_shows_up_with_its_alias_type_default_and_description() -> None:
    page = docsgen.config_page(_WithExtraField, keys={})
    assert _row(_section(page, "_WithExtraField"), "`gpuQuotaHours`") == [
        "`gpuQuotaHours`",
        "integer (≥ `1`)",
        "`12`",
        "hours of GPU a day",
    ]
    assert "| `gpuQuotaHours` | integer (≥ `1`) |" in page  # the top-level key table too


def test_a_field_added_to_a_nested_model_shows_up_in_that_models_section() -> None:
    page = docsgen.config_page(_NestedExtra, keys={})
    assert _row(_section(page, "_SettingsPlus"), "`nodePool`") == [
        "`nodePool`",
        "string or null",
        "`null`",
        "",
    ]


def test_a_required_field_says_required() -> None:
    page = docsgen.config_page(intents.StackConfig, keys=docsgen.CONFIG_KEYS)
    assert _row(page, "`imageDigest`")[2] == "required"
    assert _row(page, "`context`")[2] == "required"


class _QuotaExceededError(errors.InferCraneError):
    """The namespace's GPU quota is used up; the same call succeeds once some is freed."""

    code: ClassVar[str] = "quota-exceeded"
    retryable: ClassVar[bool] = True


def test_an_error_class_with_a_new_code_shows_up_with_its_retry_flag_and_exit_code() -> None:
    registry = {**errors.ERRORS, _QuotaExceededError.code: _QuotaExceededError}
    exit_codes = {**errors.EXIT_CODES, _QuotaExceededError.code: 7}
    page = docsgen.errors_page(registry, exit_codes)
    assert _row(page, "`quota-exceeded`") == [
        "`quota-exceeded`",
        "`_QuotaExceededError`",
        "retryable",
        "7",
        "The namespace's GPU quota is used up; the same call succeeds once some is freed.",
    ]


@pytest.mark.parametrize("code", sorted(errors.ERRORS))
def test_every_real_error_code_is_on_the_page_as_the_registry_says(code: str) -> None:
    page = docsgen.errors_page(errors.ERRORS, errors.EXIT_CODES)
    cells = _row(page, f"`{code}`")
    cls = errors.ERRORS[code]
    assert cells[1:4] == [
        f"`{cls.__name__}`",
        "retryable" if cls.retryable else "permanent",
        str(errors.EXIT_CODES[code]),
    ]


def _scale(args: argparse.Namespace, ctx: commands.Context) -> views.Result:
    raise NotImplementedError  # never run: only the table entry is documented


def _replicas_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument("--to", type=int, required=True, help="how many replicas")


def test_a_command_added_to_the_table_shows_up_with_its_help_usage_and_flags() -> None:
    scale = commands.Command("scale", "change one key's replica count", (_replicas_flag,), _scale)
    page = docsgen.cli_page((*commands.COMMANDS, scale))
    section = _section(page, "scale")
    assert section.startswith("\nchange one key's replica count\n")
    assert "infercrane-pulumi scale [-h] --to TO [--json]" in section
    assert _row(section, "`--to`") == ["`--to`", "required; how many replicas"]
    assert _row(section, "`--json`") == ["`--json`", "versioned JSON envelope"]


@pytest.mark.parametrize("command", [command.name for command in commands.COMMANDS])
def test_every_real_command_has_a_section(command: str) -> None:
    assert f"\n## {command}\n" in docsgen.cli_page(commands.COMMANDS)


def _properties(model: type[BaseModel]) -> list[tuple[str, dict[str, Any]]]:
    """Every field of ``model`` and of every model it holds: its alias and its JSON schema."""
    schema: dict[str, Any] = model.model_json_schema(by_alias=True)
    definitions = [schema, *schema.get("$defs", {}).values()]
    return [item for each in definitions for item in each.get("properties", {}).items()]


def _all_fields(model: type[BaseModel]) -> set[str]:
    """Every field alias of ``model`` and of every model it holds."""
    return {name for name, _ in _properties(model)}


def test_every_real_config_field_and_stack_key_is_on_the_configuration_page() -> None:
    page = docsgen.config_page(intents.StackConfig, keys=docsgen.CONFIG_KEYS)
    for key in (intents.KUBERNETES_KEY, intents.REPLICAS_KEY, intents.POLICY_KEY):
        assert f"| `{key}` |" in page
    fields = _all_fields(intents.StackConfig)
    assert {"kubernetes", "replicas", "policy", "imageDigest", "externalKey"} <= fields
    missing = {field for field in fields if f"| `{field}` |" not in page}
    assert missing == set()


def test_a_schema_page_lists_its_top_level_fields_and_holds_the_whole_schema() -> None:
    schema = {
        "title": "A line",
        "description": "One line of something.",
        "type": "object",
        "required": ["kind"],
        "properties": {"kind": {"enum": ["a", "b"]}, "extra": True},
    }
    page = docsgen.schema_page("line.schema.json", schema)
    assert page.splitlines()[2] == "# A line"
    assert _row(page, "`kind`") == ["`kind`", 'one of `"a"`, `"b"`', "yes", ""]
    assert _row(page, "`extra`") == ["`extra`", "any", "no", ""]
    assert '"description": "One line of something."' in page


def test_every_shipped_schema_gets_a_page() -> None:
    schemas = docsgen.product_schemas()
    assert sorted(schemas) == [
        "diff.schema.json",
        "envelope.schema.json",
        "progress.schema.json",
    ]
    generated = docsgen.pages(
        config=intents.StackConfig,
        registry=errors.ERRORS,
        exit_codes=errors.EXIT_CODES,
        commands=commands.COMMANDS,
        schemas=schemas,
    )
    assert sorted(generated) == [
        "reference/cli.md",
        "reference/configuration.md",
        "reference/errors.md",
        "reference/schemas/diff.md",
        "reference/schemas/envelope.md",
        "reference/schemas/progress.md",
    ]


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("a | b", "a \\| b"),
        ("Pulumi.<stack>.yaml", "Pulumi.&lt;stack>.yaml"),
        ("two\nlines", "two lines"),
    ],
)
def test_a_cell_keeps_the_table_and_the_text_intact(text: str, cell: str) -> None:
    assert docsgen._cell(text) == cell


def _undescribed(model: type[BaseModel]) -> set[str]:
    """Every field alias of ``model`` and of the models it holds that has no description."""
    return {name for name, prop in _properties(model) if not prop.get("description")}


def test_every_config_field_is_described_on_the_configuration_page() -> None:
    # A field's docstring is its description (intents._Model's use_attribute_docstrings): a
    # field added without one fails here, not silently in the reference.
    assert _undescribed(intents.StackConfig) == set()
    page = docsgen.config_page(intents.StackConfig, keys=docsgen.CONFIG_KEYS)
    row = next(line for line in page.splitlines() if line.startswith("| `imageDigest` |"))
    assert row.split(" | ")[-1].startswith("The runtime image, pinned by digest")

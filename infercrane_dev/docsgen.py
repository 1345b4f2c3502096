"""The documentation's reference pages, generated from the code at build time (never by hand).

Each page is a pure function from values given as arguments to a markdown string: the
configuration from the pydantic models (``intents``), the error codes from the registry and its
exit-code map (``errors``), the commands from the CLI's command table (``COMMANDS``), and one
page per JSON schema (``infercrane_pulumi/schemas``). ``pages`` gathers them from the real values;
``main`` writes them to a directory. The MkDocs hook (``docs_hook``) serves the same pages to
the build without writing them, so nothing generated is committed or can go stale.

Dev-only: it imports the product, the product never imports it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from infercrane_pulumi import errors
from infercrane_pulumi.cli.commands import COMMANDS, Command
from infercrane_pulumi.cli.entry import parser
from infercrane_pulumi.config import intents

# Where the generated pages live inside the site (``mkdocs.yml``'s nav names them).
REFERENCE_DIR = "reference"
CONFIG_PAGE = f"{REFERENCE_DIR}/configuration.md"
ERRORS_PAGE = f"{REFERENCE_DIR}/errors.md"
CLI_PAGE = f"{REFERENCE_DIR}/cli.md"
SCHEMAS_DIR = f"{REFERENCE_DIR}/schemas"
GENERATED = (
    "<!-- Generated from the code by infercrane_dev/docsgen.py: edit the code, not this. -->"
)
# Stack-file keys per top-level field of ``StackConfig``: what an operator writes.
CONFIG_KEYS = intents.STACK_KEYS

Schema = Mapping[str, Any]


def _cell(text: str) -> str:
    """One markdown table cell: a pipe or a newline would end the cell or the row, and a
    ``<stack>`` in help text would be read as an HTML tag and vanish."""
    return " ".join(text.replace("|", "\\|").replace("<", "&lt;").split())


def _code(value: object) -> str:
    return f"`{json.dumps(value)}`"


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def type_text(schema: Schema | bool, *, link: bool = True) -> str:
    """A property's JSON-schema type as a reader says it (``integer (≥ 1)``, ``Resources``).
    ``link``: a referenced definition links to its section (the configuration page has one per
    model; a schema page shows the definitions in its full text instead)."""
    if isinstance(schema, bool):  # JSON schema's own shorthand: true allows anything
        return "any" if schema else "nothing"
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})" if link else f"`{name}`"
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf", schema.get("oneOf", ()))
        kinds = [
            type_text(option, link=link)
            for option in options
            if isinstance(option, bool) or option.get("type") != "null"
        ]
        nullable = len(kinds) < len(options)
        return " or ".join(kinds) + (" or null" if nullable else "")
    if "enum" in schema:
        return "one of " + ", ".join(_code(value) for value in schema["enum"])
    if "const" in schema:
        return _code(schema["const"])
    return _typed_text(schema, link=link)


def _typed_text(schema: Schema, *, link: bool) -> str:
    kind = schema.get("type", "any")
    named = " or ".join(map(str, kind)) if isinstance(kind, list) else str(kind)
    if named == "array":
        return f"list of {type_text(schema.get('items', {}), link=link)}"
    if named == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        keys = type_text(schema.get("propertyNames", {}), link=link)
        return f"map of {keys} to {type_text(schema['additionalProperties'], link=link)}"
    # Values in code spans: a pattern's brackets would otherwise read as a markdown link.
    bounds = [
        f"{word} `{schema[key]}`"
        for key, word in (
            ("minimum", "≥"),
            ("maximum", "≤"),
            ("minLength", "length ≥"),
            ("maxLength", "length ≤"),
            ("minItems", "items ≥"),
            ("pattern", "matching"),
        )
        if key in schema
    ]
    return named + (f" ({', '.join(bounds)})" if bounds else "")


def _description(schema: Schema | bool) -> str:
    return "" if isinstance(schema, bool) else str(schema.get("description", ""))


def _model_section(name: str, schema: Schema, *, heading: str) -> list[str]:
    required = set(schema.get("required", ()))
    # The heading's own anchor (its lowercased name) is what ``type_text`` links to.
    lines = [f"## {heading}", ""]
    if schema.get("description"):
        lines += [_cell(str(schema["description"])).replace("``", "`"), ""]
    lines += ["| Field | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for field, prop in schema.get("properties", {}).items():
        default = "required" if field in required else _code(prop.get("default"))
        lines.append(
            f"| `{field}` | {_cell(type_text(prop))} | {_cell(default)} "
            f"| {_cell(str(prop.get('description', ''))).replace('``', '`')} |"
        )
    return [*lines, ""]


def config_page(root: type[BaseModel], *, keys: Mapping[str, str]) -> str:
    """Every field of ``root`` and of every model it holds: its name as written in a stack file
    (the alias), its type and bounds, its default (or "required") and its description."""
    schema = root.model_json_schema(by_alias=True, mode="validation")
    definitions: Mapping[str, Schema] = schema.get("$defs", {})
    lines = [
        GENERATED,
        "",
        "# Configuration",
        "",
        "A stack file's `config:` holds one key per top-level field below; each model's fields "
        "are written in camelCase, as listed. Rules across fields are checked after these.",
        "",
        "| Stack-file key | Type |",
        "| --- | --- |",
    ]
    for field, prop in schema.get("properties", {}).items():
        lines.append(f"| `{keys.get(field, field)}` | {_cell(type_text(prop))} |")
    lines.append("")
    lines += _model_section(root.__name__, schema, heading=root.__name__)
    for name in sorted(definitions):
        lines += _model_section(name, definitions[name], heading=name)
    return "\n".join(lines)


def errors_page(
    registry: Mapping[str, type[errors.InferCraneError]], exit_codes: Mapping[str, int]
) -> str:
    """One row per error code: retryable or permanent, the command line's exit code, and what
    the class's docstring says it means."""
    lines = [
        GENERATED,
        "",
        "# Error codes",
        "",
        "Every failure a user can see carries one of these codes, in Python as the class and in "
        "the command line's JSON as `error.code`. Retryable: the same call succeeds once the "
        "cause has gone; permanent: something must change first.",
        "",
        "| Code | Class | Retry | Exit code | Meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for code, cls in registry.items():
        retry = "retryable" if cls.retryable else "permanent"
        meaning = _first_paragraph(cls.__doc__).replace("``", "`")
        lines.append(
            f"| `{code}` | `{cls.__name__}` | {retry} | {exit_codes[code]} | {_cell(meaning)} |"
        )
    return "\n".join([*lines, ""])


def _subparsers(root: argparse.ArgumentParser) -> Mapping[str, argparse.ArgumentParser]:
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flag_rows(command: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in command._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flag = ", ".join(action.option_strings)
        if action.choices is not None:
            flag += " {" + ",".join(str(choice) for choice in action.choices) + "}"
        what = action.help or ""
        if action.required:
            what = f"required; {what}"
        rows.append(f"| `{_cell(flag)}` | {_cell(what)} |")
    return rows


def cli_page(commands: Sequence[Command], *, prog: str = "infercrane-pulumi") -> str:
    """Each command of the table: its help, its usage line and its flags, as the parser the
    command line runs builds them (``parser``), so a flag added there shows up here."""
    root = parser(commands)
    lines = [
        GENERATED,
        "",
        "# Command line",
        "",
        f"`{prog}` (also `python -m infercrane_pulumi`). Every command takes `--json` for the "
        "versioned JSON envelope ([its schema](schemas/envelope.md)); exit codes are on the "
        "[error codes](errors.md) page.",
        "",
    ]
    helps = {command.name: command.help for command in commands}
    for name, sub in _subparsers(root).items():
        usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
        lines += [f"## {name}", "", helps[name], "", "```", usage, "```", ""]
        lines += ["| Flag | What |", "| --- | --- |", *_flag_rows(sub), ""]
    return "\n".join(lines)


def schema_page(filename: str, schema: Schema) -> str:
    """One JSON schema: its title, what it describes, its top-level fields and the whole text."""
    title = str(schema.get("title", filename))
    lines = [GENERATED, "", f"# {title}", "", f"`{filename}`", ""]
    if schema.get("description"):
        lines += [str(schema["description"]), ""]
    properties: Mapping[str, Schema] = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", ()))
        lines += ["| Field | Type | Required | Description |", "| --- | --- | --- | --- |"]
        for field, prop in properties.items():
            needed = "yes" if field in required else "no"
            lines.append(
                f"| `{field}` | {_cell(type_text(prop, link=False))} | {needed} "
                f"| {_cell(_description(prop))} |"
            )
        lines.append("")
    lines += ["```json", json.dumps(schema, indent=2), "```", ""]
    return "\n".join(lines)


def schema_path(filename: str) -> str:
    return f"{SCHEMAS_DIR}/{filename.removesuffix('.schema.json')}.md"


def product_schemas() -> dict[str, Schema]:
    """The JSON schemas the package ships, by file name (read as the installed package has them)."""
    folder = resources.files("infercrane_pulumi") / "schemas"
    return {
        entry.name: json.loads(entry.read_text(encoding="utf-8"))
        for entry in sorted(folder.iterdir(), key=lambda entry: entry.name)
        if entry.name.endswith(".schema.json")
    }


def pages(
    *,
    config: type[BaseModel],
    registry: Mapping[str, type[errors.InferCraneError]],
    exit_codes: Mapping[str, int],
    commands: Sequence[Command],
    schemas: Mapping[str, Schema],
) -> dict[str, str]:
    """Every generated page, by its path inside the site."""
    generated = {
        CONFIG_PAGE: config_page(config, keys=CONFIG_KEYS),
        ERRORS_PAGE: errors_page(registry, exit_codes),
        CLI_PAGE: cli_page(commands),
    }
    for filename, schema in schemas.items():
        generated[schema_path(filename)] = schema_page(filename, schema)
    return generated


def product_pages() -> dict[str, str]:
    """The pages of the code as it is."""
    return pages(
        config=intents.StackConfig,
        registry=errors.ERRORS,
        exit_codes=errors.EXIT_CODES,
        commands=COMMANDS,
        schemas=product_schemas(),
    )


def write(generated: Mapping[str, str], out: Path) -> None:
    for relative, text in generated.items():
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def main(
    argv: Sequence[str] | None = None, *, build: Callable[[], dict[str, str]] = product_pages
) -> int:
    """``python -m infercrane_dev.docsgen DIR``: write the generated pages under DIR (to read
    them without building the site; the build itself uses ``docs_hook``)."""
    args = argparse.ArgumentParser(prog="python -m infercrane_dev.docsgen")
    args.add_argument("out", type=Path, help="directory to write the pages into")
    out: Path = args.parse_args(argv).out
    write(build(), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

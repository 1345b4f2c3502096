"""How a change reads in a pull request: one Markdown comment for people (its JSON for tools is
the command line's, ``cli.views.stack_changes``).

The comment follows what reviewers know from Pulumi's and Terraform's PR bots. Its first line is
a fixed heading, so a workflow finds its own comment and edits it in place. The one-line result
comes next, then the loud parts: deletions, replacements and likely renames, each naming its
keys, and the stack's policy (new mandatory violations as an alert, every finding in a table).
Each changed key's diff sits collapsed in ``<details>``; unchanged keys are counted, not listed;
drift found by a refresh has its own section. GitHub refuses comments over 65,536 characters, so
a comment stays within ``COMMENT_LIMIT``: summaries, warnings and the policy always stay, the
last diffs go first, and a line says how many were left out. Keys, names and diffs come from the
change under review, so they are escaped to render as text. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infercrane_pulumi.review.changes import (
    Drift,
    KeyChange,
    PolicyFinding,
    StackChanges,
    most_consequential_first,
)

COMMENT_LIMIT = 64_000
# A workflow may skip posting a new comment when it finds this line (nothing changes anywhere).
NO_CHANGES_MARKER = "<!-- infercrane:no-changes -->"

# Characters that Markdown or HTML would read as markup, spelled as character references.
_MARKUP = {ch: f"&#{ord(ch)};" for ch in "&<>\"'`*_[]|~\\#!"}


def text(value: str) -> str:
    """``value`` rendered literally in Markdown, inline or in a table cell."""
    return "".join(_MARKUP.get(ch, ch) for ch in value)


def code(value: str) -> str:
    return f"<code>{text(value)}</code>"


def heading(changes: StackChanges) -> str:
    """The stack's heading: the first line of its own comment, fixed for the stack."""
    return f"#### InferCrane `{changes.operation}` on {text(changes.project)}/{text(changes.stack)}"


@dataclass(frozen=True)
class _Section:
    kept: tuple[str, ...]  # heading, result, warnings, notes: never cut
    details: tuple[str, ...]  # one collapsed diff per changed key, cut from the end
    after: tuple[str, ...]  # unchanged count and drift: never cut


def comment(
    stacks: Sequence[StackChanges],
    *,
    title: str | None = None,
    intro: Sequence[str] = (),
    limit: int = COMMENT_LIMIT,
) -> str:
    """A Markdown comment of at most ``limit`` characters. Its first line is ``title`` (trusted
    Markdown, like ``intro``), else the first stack's heading: one stack, one comment."""
    # Warnings name every key, within a share of the limit that leaves room for the diffs.
    list_budget = limit // (4 * max(1, len(stacks)))
    sections = [_section(changes, list_budget) for changes in stacks]
    if any(c.summary.changes or c.drift for c in stacks):
        return _fit([*([title] if title else []), *intro], sections, limit)
    marker = "\n" + NO_CHANGES_MARKER + "\n"
    return _fit([*([title] if title else []), *intro], sections, limit - len(marker)) + marker


def _section(changes: StackChanges, list_budget: int) -> _Section:
    replicas = most_consequential_first(changes.replicas)
    kept = [heading(changes), f"**{changes.summary.line}**"]
    replaced = [r.external_key for r in replicas if r.change == "replace"]
    for alert, what, keys in (
        ("CAUTION", "Deletes", changes.deleted_keys),
        ("WARNING", "Replaces (deletes, then recreates)", replaced),
    ):
        if keys:
            kept.append(_alert(alert, what, keys, list_budget))
    renames = [
        f"> This looks like a rename of {code(r.old_key)} to {code(r.new_key)}: external keys "
        f"are durable, so this deletes {code(r.old_key)}'s objects and creates "
        f"{code(r.new_key)}'s."
        for r in changes.renames
    ]
    if renames:
        more = "\n> … and {} more likely renames (see the JSON output)".format
        kept.append("> [!NOTE]\n" + _bounded(renames, list_budget, "\n", more))
    kept += [text(note) for note in changes.notes]
    if changes.policy:
        kept += _policy(changes.policy, list_budget)
    details = tuple(_details(r) for r in replicas if r.change != "same")
    after = []
    same = changes.summary.same
    if same:
        after.append(f"{same} unchanged external {_plural(same, 'key')} not listed.")
    if changes.drift:
        after.append(_drift(changes.drift, list_budget))
    return _Section(tuple(kept), details, tuple(after))


def _alert(alert: str, what: str, keys: Sequence[str], list_budget: int) -> str:
    """A GitHub alert naming each key whose objects go away."""
    names = _bounded([code(k) for k in keys], list_budget, ", ", " and {} more".format)
    return (
        f"> [!{alert}]\n> **{what} the objects of {len(keys)} external "
        f"{_plural(len(keys), 'key')}:** {names}."
    )


# Most pressing first: what blocks the change, what it brings, what stays, what it fixes.
_FINDING_ORDER = {"new": 0, None: 1, "kept": 2, "fixed": 3}


def _policy(found: Sequence[PolicyFinding], list_budget: int) -> list[str]:
    """A loud alert for new mandatory violations (the workflow fails on them), then every
    finding in one table."""
    blocks = []
    blocking = [f for f in found if f.status == "new" and f.finding.enforcement == "mandatory"]
    if blocking:
        lines = [f"> - {code(f.finding.rule)}: {text(f.finding.message)}" for f in blocking]
        more = "\n> - … and {} more (see the JSON output)".format
        blocks.append(
            f"> [!CAUTION]\n> **Breaks {len(blocking)} mandatory policy "
            f"{_plural(len(blocking), 'rule')}: the change cannot be applied as it is.**\n"
            + _bounded(lines, list_budget, "\n", more)
        )
    ordered = sorted(
        found, key=lambda f: (_FINDING_ORDER[f.status], f.finding.enforcement != "mandatory")
    )
    rows = [
        f"| {f.status or 'holds'} | {f.finding.enforcement} | {code(f.finding.rule)} | "
        f"{text(f.finding.message)} |"
        for f in ordered
    ]
    blocks.append(
        "##### Policy\n\n| status | enforcement | rule | finding |\n| --- | --- | --- | --- |\n"
        + _bounded(rows, list_budget, "\n", "\n| … | | | {} more findings |".format)
    )
    return blocks


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def _bounded(items: Sequence[str], budget: int, sep: str, more: Callable[[int], str]) -> str:
    """``items`` joined, as many as fit in ``budget`` characters, then what ``more`` says."""
    shown: list[str] = []
    used = 0
    for item in items:
        if used + len(item) + len(sep) > budget:
            return sep.join(shown) + more(len(items) - len(shown))
        shown.append(item)
        used += len(item) + len(sep)
    return sep.join(shown)


def _fence(body: str) -> str:
    # Longer than any backtick run inside, so a value cannot close the fence early.
    longest = max((len(run) for run in re.findall("`+", body)), default=0)
    return "`" * max(3, longest + 1)


def _details(replica: KeyChange) -> str:
    parts = [
        f"<details><summary><b>{replica.change}</b> {code(replica.external_key)}</summary>",
    ]
    for obj in replica.objects:
        if obj.change == "same":
            continue
        fence = _fence(obj.diff)
        parts.append(f"{obj.kind} {code(obj.name)}: **{obj.change}**")
        parts.append(f"{fence}diff\n{obj.diff}{fence}")
    parts.append("</details>")
    return "\n\n".join(parts)


def _drift(drift: Sequence[Drift], list_budget: int) -> str:
    rows = [
        f"| {code(d.external_key)} | {d.kind} {code(d.name)} | "
        + ("deleted out of band" if d.gone else ", ".join(code(f) for f in d.fields))
        + " |"
        for d in drift
    ]
    return (
        "##### Drift found by the refresh\n\n"
        "Not part of this change: the cluster differs from Pulumi's state, and the run puts "
        "these objects back.\n\n| key | object | differs |\n| --- | --- | --- |\n"
        + _bounded(rows, list_budget, "\n", "\n| … | {} more objects | |".format)
    )


def _cut_line(omitted: int, total: int) -> str:
    return (
        f"**Cut:** the diffs of {omitted} of {total} changed keys are not shown, to stay "
        "within GitHub's comment size limit; the JSON output has every diff."
    )


def _fit(lead: list[str], sections: Sequence[_Section], limit: int) -> str:
    """Lead, then each section's kept blocks, its diffs while they fit, and its after blocks."""
    always = [*lead] + [b for s in sections for b in (*s.kept, *s.after)]
    reserve = [_cut_line(len(s.details), len(s.details)) for s in sections if s.details]
    budget = limit - sum(len(block) + 2 for block in always + reserve)
    blocks = list(lead)
    cutting = False
    for section in sections:
        blocks += section.kept
        shown = 0
        for block in section.details:
            cutting = cutting or len(block) + 2 > budget
            if not cutting:
                blocks.append(block)
                budget -= len(block) + 2
                shown += 1
        if shown < len(section.details):
            blocks.append(_cut_line(len(section.details) - shown, len(section.details)))
        blocks += section.after
    document = "\n\n".join(blocks) + "\n"
    if len(document) <= limit:
        return document
    # Only when the summaries and warnings of very many stacks outgrow the limit themselves.
    note = f"\n\n**Cut:** truncated at {limit} characters, {{}} characters omitted.\n"
    keep = limit - len(note.format(len(document)))
    return document[:keep] + note.format(len(document) - keep)

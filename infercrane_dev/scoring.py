"""`make lint`'s scoring of the rendered objects with the tools platform teams run.

Every variant (the demo stack and each stack under ``tests/fixtures/rendered``: both workload
APIs, every opt-in, custom workloads) is rendered through the program's own builders and scored
by kube-score and checkov. A KServe variant is scored as the Deployment KServe makes of its
predictor, since neither tool reads an InferenceService. Each variant's namespace also holds
the shipped NetworkPolicy, as a namespace bootstrapped from ``deploy/kubernetes`` would.
A finding fails the lint unless ``hack/lint/exceptions.yaml`` lists its check with a reason;
an exception that no finding needs fails it too, so the list never outgrows the truth.

Dev only, never shipped. The decisions (what a finding is, which are excepted) are pure; the
tools run in ``main``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infercrane_dev import DEPLOY_DIR
from infercrane_pulumi.config.files import load_stack_file
from infercrane_pulumi.objects import manifests, workloads

ROOT = Path(__file__).resolve().parents[1]
VARIANTS_DIR = ROOT / "tests" / "fixtures" / "rendered"
EXCEPTIONS_FILE = ROOT / "hack" / "lint" / "exceptions.yaml"
NETWORK_POLICY = DEPLOY_DIR / "network-policy" / "runtime-ingress.yaml"
TOOLS = ("kube-score", "checkov")
# kube-score's grade for a check that passed.
ALL_OK = 10


@dataclass(frozen=True, order=True)
class Finding:
    tool: str
    check: str
    variant: str
    obj: str
    message: str = ""

    def line(self) -> str:
        return f"{self.tool} {self.check} {self.variant} {self.obj}: {self.message}".rstrip(": ")


def variant_stacks() -> dict[str, Path]:
    """Every variant, by name: the demo stack and each stack file beside the rendered fixtures."""
    stacks = {"demo": ROOT / "stacks" / "Pulumi.demo.yaml"}
    for path in sorted(VARIANTS_DIR.glob("Pulumi.*.yaml")):
        stacks[path.name.removeprefix("Pulumi.").removesuffix(".yaml")] = path
    return stacks


def as_kserve_makes_it(isvc: Mapping[str, Any]) -> manifests.Manifest:
    """The Deployment KServe's Standard mode makes of an InferenceService's predictor: the
    predictor's Pod fields, under the InferenceService's labels."""
    meta = isvc["metadata"]
    name = f"{meta['name']}-predictor"
    pod = {
        k: v
        for k, v in isvc["spec"]["predictor"].items()
        if k not in ("minReplicas", "maxReplicas")
    }
    labels = dict(meta["labels"]) | {"serving.kserve.io/inferenceservice": meta["name"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels},
        "spec": {
            "replicas": isvc["spec"]["predictor"]["minReplicas"],
            "selector": {"matchLabels": {"serving.kserve.io/inferenceservice": meta["name"]}},
            "template": {"metadata": {"labels": labels}, "spec": copy.deepcopy(pod)},
        },
    }


def scored_objects(
    objects: Iterable[Mapping[str, Any]], network_policy: Mapping[str, Any]
) -> list[Any]:
    """What the tools read for one variant: its objects (KServe's as Deployments) and the
    shipped NetworkPolicy in each of its namespaces."""
    scored: list[Any] = [
        as_kserve_makes_it(obj) if obj["kind"] == "InferenceService" else dict(obj)
        for obj in objects
    ]
    for namespace in sorted({obj["metadata"]["namespace"] for obj in scored}):
        policy = copy.deepcopy(dict(network_policy))
        policy["metadata"]["namespace"] = namespace
        scored.append(policy)
    return scored


def kube_score_findings(variant: str, report: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Every check kube-score ran and did not pass (warnings included)."""
    return [
        Finding(
            "kube-score",
            check["check"]["id"],
            variant,
            f"{obj['type_meta']['kind']}/{obj['object_meta']['name']}",
            "; ".join(c.get("summary", "") for c in check.get("comments") or []),
        )
        for obj in report
        for check in obj["checks"]
        if not check["skipped"] and check["grade"] < ALL_OK
    ]


def checkov_findings(variant: str, report: Any) -> list[Finding]:
    """Every failed check; checkov writes one report, or a list of them, per framework."""
    reports: list[Mapping[str, Any]] = report if isinstance(report, list) else [report]
    return [
        Finding("checkov", failed["check_id"], variant, failed["resource"], failed["check_name"])
        for one in reports
        for failed in (one.get("results") or {}).get("failed_checks") or []
    ]


def verdict(findings: Iterable[Finding], exceptions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per finding no exception covers, then one per exception nothing needed."""
    problems: list[str] = []
    used: set[tuple[str, str]] = set()
    for finding in sorted(set(findings)):
        if finding.check in (exceptions.get(finding.tool) or {}):
            used.add((finding.tool, finding.check))
        else:
            problems.append(finding.line())
    for tool in TOOLS:
        for check in sorted(exceptions.get(tool) or {}):
            if (tool, check) not in used:
                problems.append(
                    f"{EXCEPTIONS_FILE.name}: {tool} {check} is excepted but found nowhere"
                )
    return problems


def load_exceptions(path: Path = EXCEPTIONS_FILE) -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unknown = set(document) - set(TOOLS)
    missing_reason = [
        f"{tool} {check}"
        for tool in TOOLS
        for check, entry in (document.get(tool) or {}).items()
        if not isinstance(entry, Mapping) or not str(entry.get("reason", "")).strip()
    ]
    if unknown or missing_reason:
        raise SystemExit(
            f"{path}: unknown tools {sorted(unknown)} or no reason for {missing_reason}"
        )
    return {tool: dict(document.get(tool) or {}) for tool in TOOLS}


def _run_json(argv: list[str], env: Mapping[str, str] | None = None) -> Any:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600, env=env)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(
            f"{argv[0]} gave no JSON (exit {done.returncode}): {done.stderr[-2000:]}"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infercrane_dev.scoring", description=__doc__)
    parser.add_argument("--kube-score", required=True, type=Path, help="the kube-score binary")
    parser.add_argument("--checkov", required=True, type=Path, help="the checkov executable")
    args = parser.parse_args(argv)
    exceptions = load_exceptions()
    policy = yaml.safe_load(NETWORK_POLICY.read_text(encoding="utf-8"))
    # checkov asks its vendor's service for guidelines unless told not to; nothing here may
    # leave the machine.
    checkov_env = dict(os.environ) | {"BC_SKIP_MAPPING": "TRUE"}
    findings: list[Finding] = []
    with tempfile.TemporaryDirectory(prefix="infercrane-scoring-") as scratch:
        for variant, stack in variant_stacks().items():
            objects = workloads.stack_objects(load_stack_file(stack))
            path = Path(scratch) / f"{variant}.yaml"
            path.write_text(manifests.to_yaml(scored_objects(objects, policy)), encoding="utf-8")
            score = [str(args.kube_score), "score", "--output-format", "json", str(path)]
            findings += kube_score_findings(variant, _run_json(score))
            check = [str(args.checkov), "-f", str(path), "--framework", "kubernetes", "-o", "json"]
            check += ["--quiet", "--compact", "--skip-download"]
            findings += checkov_findings(variant, _run_json(check, checkov_env))
    problems = verdict(findings, exceptions)
    excepted = len(set(findings)) - sum(
        1 for p in problems if not p.startswith(EXCEPTIONS_FILE.name)
    )
    for problem in problems:
        print(problem, file=sys.stderr)
    print(
        f"scoring: {len(variant_stacks())} variants, {len(set(findings))} findings, "
        f"{excepted} excepted ({EXCEPTIONS_FILE.relative_to(ROOT)}), {len(problems)} problems"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""InferCrane's CrossGuard policy pack: the rules of ``infercrane_pulumi.policy`` over the
Deployments and InferenceServices the engine registers, and the GPU budget over the stack.

``pulumi preview --policy-pack policy [--policy-pack-config <file>]`` (docs/how-to/policy-pack.md).
Only the wiring to pulumi-policy lives here; what each rule decides, and what its configuration
means, is ``infercrane_pulumi.policy.crossguard``.
"""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from infercrane_pulumi.policy import crossguard
from infercrane_pulumi.policy.rules import GPU_BUDGET, Rule

LEVELS = {
    "mandatory": EnforcementLevel.MANDATORY,
    "advisory": EnforcementLevel.ADVISORY,
    "disabled": EnforcementLevel.DISABLED,
}


def replica_policy(rule: Rule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        found = crossguard.replica_findings(rule, args.get_config(), args.resource_type, args.props)
        for message in found:
            report(message, args.urn)

    return ResourceValidationPolicy(
        name=rule.id,
        description=rule.description,
        enforcement_level=LEVELS[rule.default],
        validate=validate,
    )


def validate_budget(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = [(r.resource_type, r.props) for r in args.resources]
    for message in crossguard.budget_findings(args.get_config(), resources):
        report(message)


PolicyPack(
    name=crossguard.PACK_NAME,
    policies=[
        *(replica_policy(rule) for rule in crossguard.REPLICA_RULES),
        StackValidationPolicy(
            name=GPU_BUDGET.id,
            description=GPU_BUDGET.description,
            enforcement_level=LEVELS[GPU_BUDGET.default],
            validate=validate_budget,
        ),
    ],
)

"""The rule set: each rule a pure function over the workloads a stack renders.

A ``Subject`` is one replica as a policy sees it: its external key, its model (unknown to a
policy pack, which sees only objects) and its workload object (the serving workload its
workload API renders, whose Pod carries the image, argv, GPU request and security context;
where that Pod sits is the API's to say, ``workloads``). ``evaluate`` runs every enabled rule and
returns ``Finding`` values, each naming its key (``None`` for the stack-wide GPU budget).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infercrane_pulumi.config.intents import Enforcement, PolicySettings, RuleId, StackConfig
from infercrane_pulumi.errors import PolicyViolationError
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.workloads import Rendered, render
from infercrane_pulumi.policy import podsecurity


@dataclass(frozen=True)
class Subject:
    external_key: str
    model: str | None
    workload: Mapping[str, Any]


@dataclass(frozen=True)
class Context:
    """What the rules need from the namespace's settings to read a workload."""

    gpu_resource: str
    gpu_product_label: str


@dataclass(frozen=True)
class Finding:
    rule: RuleId
    enforcement: Enforcement
    external_key: str | None
    message: str

    def to_record(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "enforcement": self.enforcement,
            "externalKey": self.external_key,
            "message": self.message,
        }


def pod_spec(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Pod spec inside a workload, where its workload API keeps it."""
    return workloads.of_workload(workload).pod_spec(workload)


def replica_count(workload: Mapping[str, Any]) -> int:
    return workloads.of_workload(workload).replica_count(workload)


def gpus(workload: Mapping[str, Any], context: Context) -> int:
    """GPUs the workload holds when all its replicas run."""
    per_pod = sum(
        int(((c.get("resources") or {}).get("limits") or {}).get(context.gpu_resource, 0))
        for c in pod_spec(workload).get("containers") or []
    )
    return per_pod * replica_count(workload)


def registry_path(image: str) -> str:
    """``image`` without tag or digest, with the registry Docker would pull it from."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name.rsplit(":", 1)[0]
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return name
    return f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"


def _image_registry(policy: PolicySettings, subject: Subject, _: Context) -> Iterator[str]:
    allowed = policy.allowed_registries
    if allowed is None:
        return
    for container in podsecurity.containers(pod_spec(subject.workload)):
        path = registry_path(str(container.get("image", "")))
        if not any(path == entry or path.startswith(f"{entry}/") for entry in allowed):
            yield (
                f"{subject.external_key}: image {container.get('image')} is not from an allowed "
                f"registry ({', '.join(allowed)})"
            )


def _gpu_product(policy: PolicySettings, subject: Subject, context: Context) -> Iterator[str]:
    allowed = policy.gpu_products
    if allowed is None:
        return
    product = (pod_spec(subject.workload).get("nodeSelector") or {}).get(context.gpu_product_label)
    if product not in allowed:
        yield (
            f"{subject.external_key}: GPU product {product} is not allowed here "
            f"(allowed: {', '.join(allowed)})"
        )


def _runtime_flags(policy: PolicySettings, subject: Subject, _: Context) -> Iterator[str]:
    allowed = {_as_parsed(flag) for flag in policy.allowed_flags}
    denied = [flag for flag in policy.denied_flags if _as_parsed(flag) not in allowed]
    for container in podsecurity.containers(pod_spec(subject.workload)):
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        given = {_as_parsed(entry) for entry in argv if entry.startswith("--") and entry != "--"}
        for flag in denied:
            name = _as_parsed(flag)
            # An abbreviation too: argparse (vLLM's, SGLang's) takes a unique prefix of a flag.
            if any(name.startswith(spelled) for spelled in given):
                yield f"{subject.external_key}: {flag} is in the runtime's argv"


def _as_parsed(entry: str) -> str:
    """A flag as the runtimes' parsers read it: its name alone (``--flag=value`` and ``--flag
    value`` alike), ``_`` and ``-`` alike (vLLM's parser turns one into the other)."""
    return entry.split("=", 1)[0].replace("_", "-")


def _pod_security(policy: PolicySettings, subject: Subject, _: Context) -> Iterator[str]:
    found = podsecurity.violations(pod_spec(subject.workload), policy.pod_security)
    if found:
        yield (
            f"{subject.external_key}: the Pod does not meet Pod Security "
            f"{policy.pod_security!r}: {'; '.join(found)}"
        )


# The shipped runner's own Secrets (deploy/kubernetes/runner: the state backend's URL and
# password, the stack's passphrase): a Pod that referenced one could print them, and with them
# read every stack the state holds. No policy allows them.
RUNNER_SECRETS = frozenset({"infercrane-runner-state"})


def _secret_reference(policy: PolicySettings, subject: Subject, _: Context) -> Iterator[str]:
    allowed = policy.allowed_secrets
    for name in sorted(secret_names(pod_spec(subject.workload))):
        if name in RUNNER_SECRETS:
            yield f"{subject.external_key}: Secret {name} is the runner's own, never a replica's"
        elif allowed is not None and name not in allowed:
            shown = ", ".join(allowed) or "none"
            yield f"{subject.external_key}: Secret {name} is not allowed here (allowed: {shown})"


def secret_names(pod: Mapping[str, Any]) -> set[str]:
    """Every Secret a Pod spec reads: env values, envFrom, volumes (projected ones too) and
    image pull secrets."""
    names = {str(ref.get("name")) for ref in pod.get("imagePullSecrets") or []}
    for container in podsecurity.containers(pod):
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            names |= set() if ref is None else {str(ref.get("name"))}
        for source in container.get("envFrom") or []:
            ref = source.get("secretRef")
            names |= set() if ref is None else {str(ref.get("name"))}
    for volume in pod.get("volumes") or []:
        secret = volume.get("secret")
        names |= set() if secret is None else {str(secret.get("secretName"))}
        for source in (volume.get("projected") or {}).get("sources") or []:
            projected = source.get("secret")
            names |= set() if projected is None else {str(projected.get("name"))}
    return names


def _model_name(policy: PolicySettings, subject: Subject, _: Context) -> Iterator[str]:
    patterns, model = policy.model_patterns, subject.model
    if (
        patterns is not None
        and model is not None
        and not any(fnmatch.fnmatchcase(model, p) for p in patterns)
    ):
        yield (f"{subject.external_key}: model {model} matches none of {', '.join(patterns)}")


ReplicaRule = Callable[[PolicySettings, Subject, Context], Iterator[str]]


@dataclass(frozen=True)
class Rule:
    id: RuleId
    description: str
    default: Enforcement


REPLICA_RULES: Mapping[Rule, ReplicaRule] = {
    Rule("image-registry", "images come only from the allowed registries", "mandatory"): (
        _image_registry
    ),
    Rule("gpu-product", "replicas ask only for the allowed GPU products", "mandatory"): (
        _gpu_product
    ),
    Rule("runtime-flags", "no denied flag in the runtime's argv", "mandatory"): _runtime_flags,
    Rule("pod-security", "Pods meet the namespace's Pod Security level", "mandatory"): (
        _pod_security
    ),
    Rule("model-name", "models match the namespace's patterns", "advisory"): _model_name,
    Rule("secret-reference", "Pods read only the allowed Secrets", "mandatory"): (
        _secret_reference
    ),
}
GPU_BUDGET = Rule("gpu-budget", "the replicas hold no more GPUs than the budget", "mandatory")
RULES: tuple[Rule, ...] = (*REPLICA_RULES, GPU_BUDGET)


def enforcement(policy: PolicySettings, rule: Rule) -> Enforcement:
    return policy.enforcement.get(rule.id, rule.default)


def judging(platform: PolicySettings | None, stack: PolicySettings) -> tuple[PolicySettings, ...]:
    """The policies a stack is judged by: its own (``infercrane:policy``), or, under a platform's
    policy, the platform's and the stack's over it. A setting the stack file gives replaces the
    platform's in the stack's copy, one it leaves out is the platform's; a replica must meet
    both, so a stack file only tightens what its platform allows."""
    if platform is None:
        return (stack,)
    given = {name: getattr(stack, name) for name in stack.model_fields_set}
    return (platform, platform.model_copy(update=given))


_STRICTNESS: Mapping[Enforcement, int] = {"disabled": 0, "advisory": 1, "mandatory": 2}


def evaluate(
    policy: PolicySettings,
    subjects: Sequence[Subject],
    context: Context,
    *,
    platform: PolicySettings | None = None,
) -> tuple[Finding, ...]:
    """Every enabled rule over ``subjects`` (one stack's replicas), per key in key order, then
    the stack's, under every policy the stack is judged by (``judging``): a finding two of them
    report is reported once, at the stricter level."""
    found: dict[tuple[RuleId, str | None, str], Enforcement] = {}
    for judged in judging(platform, policy):
        for rule, key, message, level in _findings(judged, subjects, context):
            seen = found.get((rule, key, message), "disabled")
            found[(rule, key, message)] = max(seen, level, key=_STRICTNESS.__getitem__)
    ordered = sorted(found.items(), key=lambda item: (item[0][1] is None, item[0][1] or ""))
    return tuple(Finding(rule, level, key, message) for (rule, key, message), level in ordered)


def _findings(
    policy: PolicySettings, subjects: Sequence[Subject], context: Context
) -> Iterator[tuple[RuleId, str | None, str, Enforcement]]:
    for subject in sorted(subjects, key=lambda s: s.external_key):
        for rule, check in REPLICA_RULES.items():
            level = enforcement(policy, rule)
            if level != "disabled":
                for message in check(policy, subject, context):
                    yield rule.id, subject.external_key, message, level
    level = enforcement(policy, GPU_BUDGET)
    if level != "disabled":
        for message in over_budget(policy, subjects, context):
            yield GPU_BUDGET.id, None, message, level


def over_budget(
    policy: PolicySettings, subjects: Sequence[Subject], context: Context
) -> Iterator[str]:
    """The GPU budget over one stack's replicas: at most one message."""
    total = sum(gpus(subject.workload, context) for subject in subjects)
    if policy.gpu_budget is not None and total > policy.gpu_budget:
        yield (
            f"the replicas hold {total} GPUs, over the namespace's budget of {policy.gpu_budget}"
        )


def evaluate_rendered(
    rendered: Rendered, platform: PolicySettings | None = None
) -> tuple[Finding, ...]:
    """``evaluate`` under the stack's policy (and ``platform``'s) over the workloads it
    rendered (the first object of each intent)."""
    config = rendered.config
    settings = config.kubernetes
    subjects = [
        Subject(intent.external_key, intent.model, rendered.objects[intent.external_key][0])
        for intent in config.replicas
    ]
    context = Context(settings.gpu_resource, settings.gpu_product_label)
    return evaluate(config.policy, subjects, context, platform=platform)


def evaluate_stack(
    config: StackConfig, platform: PolicySettings | None = None
) -> tuple[Finding, ...]:
    """``evaluate_rendered`` over what ``config`` renders."""
    return evaluate_rendered(render(config, stack=None), platform)


def enforce(rendered: Rendered, platform: PolicySettings | None = None) -> tuple[Finding, ...]:
    """The advisory findings of a stack (judged under ``platform`` too, if given); raise
    ``PolicyViolationError`` listing every mandatory one (per key in key order, then the
    stack's) when there is any."""
    findings = evaluate_rendered(rendered, platform)
    mandatory = [f.message for f in findings if f.enforcement == "mandatory"]
    if mandatory:
        raise PolicyViolationError(mandatory)
    return tuple(f for f in findings if f.enforcement == "advisory")

"""Run the real program under ``pulumi.runtime.set_mocks`` and record every registration."""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

from infercrane_pulumi.automation import pulumi_versions
from infercrane_pulumi.program.handoff import Carried
from infercrane_pulumi.program.program import Preflight, Report, build_program, judged

# The kubeconfig a driver gives a stack whose settings name none.
DRIVER_KUBECONFIG = "/run/infercrane/driver-kubeconfig"


@dataclass
class Registration:
    type: str
    name: str
    parent: str
    provider: str
    custom: bool
    inputs: dict[str, Any]
    secret_inputs: frozenset[str]
    retain_on_delete: bool
    version: str  # the plugin version asked for ("" when left to the SDK)


@dataclass
class Run:
    registrations: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    @property
    def kubernetes_objects(self) -> list[Registration]:
        return [
            r for r in self.registrations if r.custom and not r.type.startswith("pulumi:providers:")
        ]


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", args.inputs

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class _RecordingMonitor(MockMonitor):
    def __init__(self, run: Run) -> None:
        super().__init__(_Mocks())
        self._run = run

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            self._run.registrations.append(
                Registration(
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    provider=request.provider,
                    custom=bool(request.custom),
                    inputs=pulumi.runtime.rpc.deserialize_properties(request.object),
                    secret_inputs=_secret_keys(request.object),
                    retain_on_delete=bool(request.retainOnDelete),
                    version=str(request.version),
                )
            )
        return response


def _secret_keys(struct: Any) -> frozenset[str]:
    raw = json_format.MessageToDict(struct)
    return frozenset(
        key
        for key, value in raw.items()
        if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig
    )


@functools.cache
def _loop() -> asyncio.AbstractEventLoop:
    """The process's one loop for the mocks, made when a test first runs the program (a
    session that only collects this module makes none) and closed when the process ends."""
    loop = asyncio.new_event_loop()
    atexit.register(loop.close)
    return loop


@functools.cache
def _mocks_serve_hooks() -> bool:
    """Whether this SDK's mocks take a resource hook, as every component of the program
    binds one: before some release after 3.230 the SDK served hooks to a real engine's
    monitor only (make test-pythons runs the unit tests at the range's lowest SDK)."""
    asyncio.set_event_loop(_loop())
    pulumi.runtime.set_mocks(_Mocks(), project="infercrane", stack="unit", preview=True)

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def body() -> None:
        hooks = pulumi.ResourceHookBinding(before_delete=[pulumi.ResourceHook("probe", print)])
        pulumi.ComponentResource(
            "probe:index:Probe", "probe", opts=pulumi.ResourceOptions(hooks=hooks)
        )

    try:
        body()
    except Exception:  # whatever the SDK raises for it: the program cannot run under mocks
        return False
    return True


def run_program(
    kubernetes: Any,
    replicas: Any,
    *,
    preflight: Preflight | None = None,
    carried: Carried | None = None,
    report: Report | None = None,
    preview: bool = False,
    secret_keys: tuple[str, ...] = (),
    kubeconfig: str | None = DRIVER_KUBECONFIG,
    section: Mapping[str, Any] | None = None,
) -> Run:
    """Run ``build_program`` once with the given config blocks (``secret_keys``: the config
    keys Pulumi holds as secrets) and what a driver hands it (``kubeconfig``: the driver's);
    never raises the program error. ``section``: the whole configuration the engine hands
    over instead, every key of it as a stack file spells it, as a person's ``pulumi up`` has
    it."""
    if not _mocks_serve_hooks():
        pytest.skip(
            f"pulumi {pulumi_versions.sdk_version()}'s mocks take no resource hook, which every "
            "component binds: the conformance subset runs the program on this SDK's real engine"
        )
    # The mocks make futures before any loop runs. Python 3.11 gave the thread a loop
    # implicitly; 3.12+ warns instead, unless one is set: ours, one for the process, as 3.11's.
    asyncio.set_event_loop(_loop())
    run = Run()
    pulumi.runtime.set_mocks(
        _Mocks(),
        project="infercrane",
        stack="unit",
        preview=preview,
        monitor=_RecordingMonitor(run),
    )
    if section is None:
        section = {"infercrane:kubernetes": kubernetes, "infercrane:replicas": replicas}
    handed = {key: json.dumps(value) for key, value in section.items()}
    pulumi.runtime.set_all_config(handed, list(secret_keys))
    program = build_program(
        judged(preflight or (lambda rendered: None)),
        kubeconfig=kubeconfig,
        on_delete=lambda _config, _key: None,
        carried=carried,
        report=report,
        given=handed,
    )

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def body() -> pulumi.Output[None]:
        program()
        # The stack's exports, resolved (the test decorator awaits what it returns).
        exports = getattr(pulumi.runtime.get_root_resource(), "outputs", {}) or {}
        return pulumi.Output.from_input(exports).apply(run.outputs.update)

    try:
        body()
    except Exception as error:  # the tests assert on the error they expect
        run.error = error
    return run

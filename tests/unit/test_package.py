"""The component package's decisions, without an engine: its schema is the models' fields,
its inputs are validated as a stack file is, and its ``Ownership`` is replaced exactly when
the objects it deletes would be elsewhere (replacing it deletes the old ones)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pulumi
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import provider_pb2

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.objects import naming
from infercrane_pulumi.package import PLUGIN_DIR, removal
from infercrane_pulumi.package.replica import config_of
from infercrane_pulumi.package.schema import package_schema
from infercrane_pulumi.package.server import ReplicaProvider, Servicer
from tests.unit.samples import IMAGE, kubernetes, replica

SCHEMA: dict[str, Any] = json.loads(package_schema("1.2.3"))


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if "$ref" in node else set()
        return found.union(*(refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(value) for value in node))
    return set()


def test_the_replica_inputs_are_the_settings_and_every_field_of_an_intent() -> None:
    component = SCHEMA["resources"][naming.REPLICA_TYPE]
    intent = ReplicaIntent.model_json_schema(by_alias=True)
    assert component["isComponent"] is True
    assert set(component["inputProperties"]) == {"kubernetes", *intent["properties"]}
    assert component["requiredInputs"] == ["kubernetes", *intent["required"]]
    settings = SCHEMA["types"]["infercrane:kubernetes:KubernetesSettings"]
    assert set(settings["properties"]) == set(
        KubernetesSettings.model_json_schema(by_alias=True)["properties"]
    )
    assert settings["required"] == ["context", "imageDigest"]
    assert SCHEMA["version"] == "1.2.3"


def test_every_type_the_schema_refers_to_is_in_it() -> None:
    local = {ref.removeprefix("#/types/") for ref in refs(SCHEMA) if ref.startswith("#/types/")}
    assert local and local <= set(SCHEMA["types"])
    assert refs(SCHEMA) - {f"#/types/{name}" for name in local} <= {"pulumi.json#/Any"}


def test_the_plugin_directory_ships_beside_the_package() -> None:
    assert (PLUGIN_DIR / "PulumiPlugin.yaml").read_text().count("runtime: python") == 1
    assert "infercrane_pulumi.package.server" in (PLUGIN_DIR / "__main__.py").read_text()
    assert json.loads(ReplicaProvider().schema or "{}")["name"] == "infercrane"


def test_inputs_are_validated_as_a_stack_file_of_one_intent() -> None:
    config = config_of({"kubernetes": kubernetes(kubeconfig="/etc/k"), **replica(port=9000)})
    assert config.replicas == (ReplicaIntent.model_validate(replica(port=9000)),)
    assert config.kubernetes == KubernetesSettings.model_validate(kubernetes(kubeconfig="/etc/k"))


def test_an_input_that_is_not_yet_known_or_secret_is_refused() -> None:
    async def refusals() -> list[str]:
        # Outputs need an event loop, as a program's have.
        given = [
            {"kubernetes": kubernetes(), **replica(model=pulumi.Output.from_input("m"))},
            {"kubernetes": kubernetes(kubeconfig=pulumi.Output.secret("/k")), **replica()},
        ]
        found = []
        for inputs in given:
            with pytest.raises(ConfigError) as refused:
                config_of(inputs)
            found.append(str(refused.value))
        return found

    why = (
        ": must be plain values, known before the component is constructed (not another "
        "resource's output, nor a secret: give the kubeconfig as a path)"
    )
    assert asyncio.run(refusals()) == [f"model{why}", f"kubernetes{why}"]


@pytest.mark.parametrize(
    ("inputs", "said"),
    [
        (
            {"kubernetes": kubernetes(kubeconfig="apiVersion: v1\nkind: Config\n"), **replica()},
            "kubeconfig contents in plain text",
        ),
        ({"kubernetes": kubernetes(), **replica(modle="x")}, "modle"),
        ({**replica()}, "infercrane:kubernetes"),
    ],
)
def test_inputs_a_stack_file_would_refuse_are_refused(inputs: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_of(inputs)
    assert said in str(refused.value)


def held(**settings: Any) -> dict[str, str]:
    parsed = KubernetesSettings.model_validate(kubernetes(kubeconfig="/etc/k") | settings)
    return removal.held(parsed, "dep-7-r0", stack="yaml-replicas/dev")


@pytest.mark.parametrize(
    ("new", "moved"),
    [
        (held(), []),
        (held(namespace="infercrane-system"), []),  # the default, spelt out
        (held(imageDigest=IMAGE.replace("ab", "cd")), []),
        (held(kubeconfig="/etc/other"), []),
        (held(namespace="team-b"), ["kubernetes"]),
        (held(context="other-cluster"), ["kubernetes"]),
        (held(workloadApi="kserve"), ["kubernetes"]),
        (held() | {"externalKey": "dep-8-r0"}, ["externalKey"]),
        (held() | {"stack": "yaml-replicas/prod"}, ["stack"]),
    ],
)
def test_ownership_is_replaced_exactly_when_its_objects_move(
    new: dict[str, str], moved: list[str]
) -> None:
    assert removal.replaced(held(), new) == moved
    request = provider_pb2.DiffRequest(olds=struct(held()), news=struct(new))
    answer = asyncio.run(Servicer(ReplicaProvider(), [], "").Diff(request, None))
    same = new == held()
    assert answer.changes == (
        provider_pb2.DiffResponse.DIFF_NONE if same else provider_pb2.DiffResponse.DIFF_SOME
    )
    assert list(answer.replaces) == moved


def struct(values: dict[str, str]) -> struct_pb2.Struct:
    made = struct_pb2.Struct()
    made.update(values)
    return made

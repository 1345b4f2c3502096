"""The component package's Pulumi schema, drawn from the models a stack file is validated by:
``Replica``'s inputs are a stack's ``infercrane:kubernetes`` settings and one replica intent's
fields, typed as the models type them, so that a program in any Pulumi language is checked
against the same fields (and a misspelt one refused) before the component validates them again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import naming

PACKAGE = "infercrane"
MODULE = naming.REPLICA_TYPE.split(":")[1]
SETTINGS_INPUT = "kubernetes"
# What a component reports once registered (the state ``replica.construct`` returns).
OUTPUTS = {
    "resourceId": "The replica's id in InferCrane: its workload API, namespace and name.",
    "endpoint": "Where its objects serve inside the cluster.",
}

JsonSchema = Mapping[str, Any]


def package_schema(version: str) -> str:
    """The schema the provider answers ``GetSchema`` with, as JSON."""
    intent = ReplicaIntent.model_json_schema(by_alias=True)
    settings = KubernetesSettings.model_json_schema(by_alias=True)
    defs = {**intent.get("$defs", {}), **settings.get("$defs", {})}
    types = {_token(name): _object_type(spec) for name, spec in sorted(defs.items())}
    types[_token("KubernetesSettings")] = _object_type(settings)
    inputs = {
        SETTINGS_INPUT: {
            "$ref": f"#/types/{_token('KubernetesSettings')}",
            "description": "The namespace's settings, as a stack file's infercrane:kubernetes.",
        },
        **_properties(intent),
    }
    replica = {
        "isComponent": True,
        "description": ReplicaIntent.__doc__ or "",
        "inputProperties": inputs,
        "requiredInputs": [SETTINGS_INPUT, *intent.get("required", [])],
        "properties": {
            name: {"type": "string", "description": text} for name, text in OUTPUTS.items()
        },
        "required": list(OUTPUTS),
    }
    return json.dumps(
        {
            "name": PACKAGE,
            "version": version,
            "description": "InferCrane's GPU inference replicas on Kubernetes.",
            "resources": {naming.REPLICA_TYPE: replica},
            "types": types,
        },
        indent=2,
    )


def _token(name: str) -> str:
    return f"{PACKAGE}:{MODULE}:{name}"


def _object_type(spec: JsonSchema) -> dict[str, Any]:
    return {
        "type": "object",
        "description": spec.get("description", ""),
        "properties": _properties(spec),
        "required": list(spec.get("required", [])),
    }


def _properties(spec: JsonSchema) -> dict[str, Any]:
    return {
        name: {**_property(node), "description": node.get("description", "")}
        for name, node in spec.get("properties", {}).items()
    }


def _property(node: JsonSchema) -> dict[str, Any]:
    """A JSON Schema node as a Pulumi property type. Optional (``X | None``) is Pulumi's
    default, so null drops out; patterns, bounds and enums stay the models' to check."""
    if "$ref" in node:
        return {"$ref": f"#/types/{_token(node['$ref'].rsplit('/', 1)[-1])}"}
    options = [option for option in node.get("anyOf", ()) if option.get("type") != "null"]
    if len(options) == 1:
        return _property(options[0])
    kind = node.get("type")
    if kind in ("string", "integer", "number", "boolean"):
        return {"type": kind}
    if kind == "array":
        return {"type": "array", "items": _property(node.get("items", {}))}
    if kind == "object" and isinstance(node.get("additionalProperties"), Mapping):
        return {"type": "object", "additionalProperties": _property(node["additionalProperties"])}
    return {"$ref": "pulumi.json#/Any"}

"""The component package's provider process, as the engine starts it (``plugin/__main__.py``):
it constructs ``Replica`` (``replica``) and answers the engine for ``Ownership`` (``removal``).
The SDK's provider server answers construct alone, so this one adds the calls the engine makes
of a custom resource: check, diff, create, read, update and delete.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import grpc
import pulumi
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.provider import ConstructResult, Provider
from pulumi.provider.server import ProviderServicer
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from infercrane_pulumi.errors import InferCraneError
from infercrane_pulumi.objects import naming
from infercrane_pulumi.package import removal, replica
from infercrane_pulumi.package.schema import package_schema
from infercrane_pulumi.program.program import describe

VERSION = metadata.version("infercrane-pulumi")


class ReplicaProvider(Provider):
    def __init__(self) -> None:
        super().__init__(VERSION, package_schema(VERSION))

    def construct(
        self,
        name: str,
        resource_type: str,
        inputs: pulumi.Inputs,
        options: pulumi.ResourceOptions | None = None,
    ) -> ConstructResult:
        if resource_type != naming.REPLICA_TYPE:
            raise pulumi.RunError(f"{resource_type}: not a component of this package")
        try:
            return replica.construct(name, inputs, options)
        except InferCraneError as error:
            # The engine shows the message, not a Python traceback.
            raise pulumi.RunError(describe(error)) from error


class Servicer(ProviderServicer):
    """The SDK's servicer, and the lifecycle of ``Ownership``, the only custom resource of
    this package."""

    async def Construct(self, request: Any, context: Any) -> Any:
        try:
            return await super().Construct(request, context)
        except pulumi.RunError as refused:
            # The refusal as the engine shows it, rather than gRPC's "Unexpected <class ...>".
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(refused))

    async def CheckConfig(self, request: Any, context: Any) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    async def DiffConfig(self, request: Any, context: Any) -> Any:
        return provider_pb2.DiffResponse()

    async def Check(self, request: Any, context: Any) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    async def Diff(self, request: Any, context: Any) -> Any:
        old, new = _values(request.olds), _values(request.news)
        if old == new:
            return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME, replaces=removal.replaced(old, new)
        )

    async def Create(self, request: Any, context: Any) -> Any:
        key = _values(request.properties).get("externalKey", "")
        return provider_pb2.CreateResponse(
            id=naming.object_name(str(key)), properties=request.properties
        )

    async def Read(self, request: Any, context: Any) -> Any:
        return provider_pb2.ReadResponse(
            id=request.id, properties=request.properties, inputs=request.inputs
        )

    async def Update(self, request: Any, context: Any) -> Any:
        return provider_pb2.UpdateResponse(properties=request.news)

    async def Delete(self, request: Any, context: Any) -> Any:
        try:
            removal.delete(_values(request.properties))
        except InferCraneError as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, describe(error))
        return empty_pb2.Empty()


def _values(properties: struct_pb2.Struct) -> dict[str, Any]:
    return dict(json_format.MessageToDict(properties))


def main(args: Sequence[str] = sys.argv[1:]) -> None:
    """Serve the engine at the address it passed; tell it the port, as every plugin does."""
    parser = argparse.ArgumentParser(description="InferCrane's component package provider")
    parser.add_argument("engine", help="the Pulumi engine's address")
    engine = parser.parse_known_args(args)[0].engine
    asyncio.run(_serve(Servicer(ReplicaProvider(), list(args), engine_address=engine)))


async def _serve(servicer: Servicer) -> None:
    server = grpc.aio.server()
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    await server.wait_for_termination()

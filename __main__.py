"""Entry point for `pulumi up` / `pulumi preview` on this project."""

from infercrane_pulumi.cluster.preflight import preflight
from infercrane_pulumi.program import build_program

build_program(preflight)()

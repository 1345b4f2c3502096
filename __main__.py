"""Entry point for `pulumi up` / `pulumi preview` on this project."""

from infercrane_pulumi.program import main

main()

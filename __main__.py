"""Entry point for `pulumi up` / `pulumi preview` on this project."""

from infercrane_pulumi.hand_run import main

main()

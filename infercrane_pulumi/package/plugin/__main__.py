"""The component package's provider, as the engine starts a Python plugin: this file, with the
engine's address as its argument."""

from infercrane_pulumi.package.server import main

main()

"""``Replica`` as a Pulumi component package, for programs in any Pulumi language: the plugin
directory ``PLUGIN_DIR`` (a program names it under ``packages:``), whose provider constructs the
component (``replica``) and deletes a removed one's objects (``removal``)."""

from pathlib import Path

PLUGIN_DIR = Path(__file__).parent / "plugin"

"""The command line: its commands (``commands``), how results look (``views``), and the runner's
``up --every`` loop (``every``).
"""

from infercrane_pulumi.cli.commands import main

__all__ = ["main"]

"""The command line: its entry point (``entry``), its command table (``commands``) and flags
(``flags``), how results look (``views``), and the runner's ``up --every`` loop (``every``).
"""

from infercrane_pulumi.cli.entry import main

__all__ = ["main"]

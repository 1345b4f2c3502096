"""``python -m infercrane_pulumi``: the command line (``cli``), its exit code the process's."""

import sys

from infercrane_pulumi.cli import main

sys.exit(main())

"""``python -m benchmarks``: the entry ``make bench`` runs (see ``benchmarks.cli``)."""

import sys

from benchmarks.cli import main

sys.exit(main(sys.argv[1:]))

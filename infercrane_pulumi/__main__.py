import sys

from infercrane_pulumi.cli import main

sys.exit(main())

"""``python -m research.replay``: the search-efficiency replay (research/replay/cli.py)."""

import sys

from research.replay.cli import main

sys.exit(main())

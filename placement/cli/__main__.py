"""``python -m placement.cli``: the ``placement`` command."""

import sys

from placement.cli import main

sys.exit(main())

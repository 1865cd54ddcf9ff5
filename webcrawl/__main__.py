"""``python -m webcrawl`` is the ``webcrawl`` command."""

import sys

from webcrawl.cli import main

sys.exit(main())

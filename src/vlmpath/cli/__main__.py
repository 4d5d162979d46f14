"""``python -m vlmpath.cli``: the same entry as the ``vlmpath`` console script."""

import sys

from vlmpath.cli import main

sys.exit(main())

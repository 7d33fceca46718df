"""``python -m ntkcheck.verify FILE.json`` (or ``python -m verify FILE.json`` with ``ntkcheck/`` on the path)."""

import sys

from . import main

sys.exit(main())

"""``python -m ntkcheck.verify FILE.json`` (or ``python -m verify FILE.json`` with ``ntkcheck/`` on the path)."""

import sys

try:
    from . import main
except ImportError as exc:  # numpy, which every check needs, is not installed
    print(f"ntkcheck.verify: cannot re-check here: {exc.name or exc} is not installed (the verifier needs numpy "
          "and mpmath; python-flint is optional)", file=sys.stderr)
    sys.exit(3)

sys.exit(main())

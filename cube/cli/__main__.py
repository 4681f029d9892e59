"""`python -m cube.cli ARGS`: the `cube` command without the installed script (the Makefile, the
tests and the benchmarks run it so, with the checkout first on the path)."""

from __future__ import annotations

import sys

from cube.cli.app import main

sys.exit(main())

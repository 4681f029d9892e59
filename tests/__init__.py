"""CuBE's tests, one folder per layer of the package (tests/kb/ tests cube/kb/, ...), tests/e2e/ for
whole runs under papermill and tests/repo/ for the repository as a whole.

The shared helpers stay at this level (conftest.py, factories.py, judge_sim.py, city_export.py, the
local servers, fixtures/), imported as `tests.<name>`. A test reaches the repository's files through
`ROOT` and the fixtures through `FIXTURES`, never through its own file's depth, so that moving a
test file breaks no path."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

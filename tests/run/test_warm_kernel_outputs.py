"""A notebook run alone (papermill, a fresh kernel) and run through the run's warm kernel, after a
notebook that changed the kernel's state, write identical outputs (issue 41, item 2): figures,
tables, printed text and warnings, cell by cell."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from cube.run.kernel import WarmKernel

ARGS = ["--IPKernelApp.capture_fd_output=False", "--IPKernelApp.log_level=CRITICAL"]

# the earlier stage: leaves state behind that a fresh kernel would not have
BEFORE = [
    "import gc, warnings\nimport matplotlib.pyplot as plt\nimport numpy as np\nimport pandas as pd",
    "plt.rcParams['lines.linewidth'] = 7\npd.set_option('display.precision', 1)\n"
    "np.random.seed(1)\nleft_over = {'cycle': None}\nleft_over['cycle'] = left_over",
    "fig, ax = plt.subplots()\nax.plot([1, 2], [3, 1])",  # a figure left open
    "warnings.warn('said once', UserWarning)",
]
# the stage compared: a figure with CJK text, a table, a seeded draw, a warning, a name lookup
STAGE = [
    "import warnings\nimport matplotlib.pyplot as plt\nimport numpy as np\nimport pandas as pd\n"
    "from cube.pages import fonts",
    "rng = np.random.default_rng(tag)\n"
    "df = pd.DataFrame({'问题': ['甲', '乙', '丙'], 'score': rng.normal(size=3)})\ndf",
    "fig, ax = plt.subplots(figsize=(3, 2))\nax.plot(df['score'])\nax.set_title('得分 score')\n"
    "plt.show()",
    "print(sorted(plt.get_fignums()), plt.rcParams['lines.linewidth'], "
    "pd.get_option('display.precision'))",
    "warnings.warn('said once', UserWarning)",
    "print('left_over' in dir())",
]


def _notebook(path: Path, cells: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("tag = 0")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(c) for c in cells)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)
    return path


def _outputs(path: Path) -> list[list[dict]]:
    """Each code cell's outputs and execution count (papermill's timings left out; a warning's
    file name holds the kernel's process id, as in any two fresh kernels)."""
    text = re.sub(r"ipykernel_\d+", "ipykernel_PID", path.read_text(encoding="utf-8"))
    nb = json.loads(text)
    return [
        [{"count": c["execution_count"]}, *c["outputs"]]
        for c in nb["cells"]
        if c["cell_type"] == "code"
    ]


@pytest.mark.timeout(240)
def test_a_stage_writes_the_same_outputs_alone_and_in_the_warm_kernel(tmp_path):
    before = _notebook(tmp_path / "before.ipynb", BEFORE)
    stage = _notebook(tmp_path / "stage.ipynb", STAGE)
    pm.execute_notebook(
        str(stage),
        str(tmp_path / "alone.ipynb"),
        parameters={"tag": 3},
        cwd=str(tmp_path),
        kernel_name="python3",
        progress_bar=False,
    )
    with WarmKernel(tmp_path, ARGS) as k:
        k.warm_up()
        k.execute(before, tmp_path / "before_out.ipynb", {})
        k.execute(stage, tmp_path / "warm.ipynb", {"tag": 3})
        assert k.used == 2  # both in one kernel
    alone, warm = _outputs(tmp_path / "alone.ipynb"), _outputs(tmp_path / "warm.ipynb")
    assert any(o.get("data", {}).get("image/png") for cell in alone for o in cell[1:])
    assert any("said once" in "".join(o.get("text", "")) for cell in alone for o in cell[1:])
    assert warm == alone

"""`cube sweep PARAMS --grid key=v1,v2 ...`: one run per combination of values, plus an index.

Each combination is the params file with the grid's `key.path=value` overrides applied (validated
like the file) and its own run name, `<run>__<key>-<value>...`, so the runs never share a folder.
Their params files are written to `outputs/<run>__sweep/params/` (relative paths rewritten to name
the original's files from there), each run is executed by `cube run`'s runner (stages up to date
in a run are skipped as usual), and
`outputs/<run>__sweep/index.html` links every run's report with its values, CuBE score and verdict.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from cube.config.overrides import apply_overrides, parse_overrides
from cube.config.params import ParamsError, parse_params
from cube.config.project import paths_from_file, paths_relative_to
from cube.config.yaml_load import load_yaml
from cube.pages.escape import escape_text


def parse_grid(items: list[str]) -> list[tuple[str, list[Any]]]:
    """`key.path=v1,v2` strings as (key, values); every malformed item is reported at once."""
    grid, bad = [], []
    for item in items:
        key, sep, raw = item.partition("=")
        values = [load_yaml(v) for v in raw.split(",") if v.strip()] if sep else []
        if not key.strip() or not values:
            bad.append(item)
        else:
            grid.append((key.strip(), values))
    if bad:
        raise ParamsError(
            f"--grid: cannot read {bad}; expected key.path=value1,value2 (e.g. corpus.seed=1,2,3)"
        )
    return grid


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(value)).strip("_") or "x"


def sweep_runs(
    params_path: Path, grid: list[tuple[str, list[Any]]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(values, raw params) of every combination, each validated and with its own run name."""
    data = load_yaml(Path(params_path).read_text(encoding="utf-8")) or {}
    base = data.get("run", "run")
    runs, problems = [], []
    for combo in itertools.product(*[values for _, values in grid]):
        values = dict(zip([k for k, _ in grid], combo, strict=True))
        name = (
            base
            + "__"
            + "__".join(f"{_slug(k.split('.')[-1])}-{_slug(v)}" for k, v in values.items())
        )
        changed = apply_overrides(data, [*parse_overrides(list(values.items())), ("run", name)])
        changed = paths_from_file(changed, params_path)  # absolute: the files are written elsewhere
        try:
            parse_params(changed, f"{params_path} with {values}")
        except ParamsError as err:
            problems.append(str(err))
            continue
        runs.append((values, changed))
    if problems:
        raise ParamsError("\n".join(problems))
    return runs


def run_sweep(
    params_path: Path,
    grid_items: list[str],
    *,
    only: str | None = None,
    force: bool = False,
    notebooks_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Execute every combination; return the sweep's index.html."""
    from cube.run.execute import InputError, execute_run

    grid = parse_grid(grid_items)
    runs = sweep_runs(params_path, grid)
    base = load_yaml(Path(params_path).read_text(encoding="utf-8")).get("run", "run")
    outputs = Path(runs[0][1]["outputs_dir"])
    folder = outputs / f"{base}__sweep"
    (folder / "params").mkdir(parents=True, exist_ok=True)
    rows = []
    for values, data in runs:
        path = folder / "params" / f"{data['run']}.yaml"
        # each file names the original's files relative to its own folder (read back from there)
        shown = paths_relative_to(data, path.parent, outputs.parent)
        path.write_text(
            yaml.safe_dump(shown, sort_keys=False, allow_unicode=True), encoding="utf-8"
        )
        log(f"[cube] sweep: {data['run']} ({', '.join(f'{k}={v}' for k, v in values.items())})")
        href = f"../{data['run']}/report/index.html"
        try:
            summary = execute_run(
                path, only=only, force=force, notebooks_dir=notebooks_dir, log=log
            )
        except (
            InputError
        ) as err:  # checked before any stage: this combination failed, the sweep goes on
            log(f"[cube] sweep: {data['run']} failed, nothing was run:\n{err}")
            rows.append(
                {
                    "run": data["run"],
                    "values": values,
                    "ok": False,
                    "href": f"params/{data['run']}.yaml",
                    "cube": None,
                    "verdict": "",
                    "error": str(err),
                }
            )  # no report: link its params
            continue
        from cube.run.record import read_record

        decision = read_record(summary.paths.results).decision.decision
        rows.append(
            {
                "run": data["run"],
                "values": values,
                "ok": summary.ok,
                "href": href,
                "cube": decision.cube_score if decision is not None else None,
                "verdict": decision.verdict if decision is not None else "",
            }
        )
    index = folder / "index.html"
    index.write_text(_index_html(base, grid, rows), encoding="utf-8")
    return index


def _index_html(base: str, grid: list[tuple[str, list[Any]]], rows: list[dict[str, Any]]) -> str:
    keys = [k for k, _ in grid]
    head = "".join(f"<th>{escape_text(k)}</th>" for k in keys)
    body = ""
    for r in rows:
        cube = "n/a" if r["cube"] is None else f"{float(r['cube']):.1f}"
        cells = "".join(f"<td>{escape_text(str(r['values'][k]))}</td>" for k in keys)
        status = (
            "published"
            if r["ok"]
            else f"failed: {r['error']}"
            if r.get("error")
            else "failed (see its last_run.html)"
        )
        body += (
            f'<tr><td><a href="{escape_text(r["href"])}">{escape_text(r["run"])}</a></td>{cells}'
            f"<td>{cube}</td><td>{escape_text(str(r['verdict'] or ''))}</td>"
            f"<td>{escape_text(status)}</td></tr>"
        )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Sweep '
        + escape_text(base)
        + "</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{border:1px solid #d9dde3;padding:4px 10px;text-align:left}"
        "th{background:#eef1f5}</style>"
        f"</head><body><h1>Sweep of {escape_text(base)}</h1><p>One run per combination; "
        "each link opens that run's report.</p>"
        f"<table><tr><th>Run</th>{head}<th>CuBE</th><th>Verdict</th><th>Status</th>"
        f"</tr>{body}</table></body></html>"
    )

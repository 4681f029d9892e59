"""The radon complexity ratchet of the package: rule "radon" of .ci/house_rules.py (`make lint`).

mccabe (the "complexity" rule) counts the branches of statements; radon also counts what hides in
expressions: each conditional expression, each `and`/`or` of a boolean chain, each `if` of a
comprehension. Issue 39 measured ten radon-branchy blocks for every mccabe-branchy one, so a gate
on mccabe alone did not see where the complexity had moved. This rule measures, over every
cube/**/*.py, the mean cyclomatic complexity of radon's blocks (functions, methods, classes: the
blocks `radon cc` lists and benchmarks/code_shape.py counts) and the share of blocks at
`threshold` (11) or more, and compares both with the ratchet file (`[tool.cube.house]
radon-ratchet` of pyproject.toml, .ci/complexity_ratchet.toml):

- measured above a ratchet figure fails, naming the most complex blocks that are new, or more
  complex, since the commit that last set the ratchet (git; without git, the most complex blocks
  of the package);
- measured below it (by at least one unit of the last decimal kept, 0.01) passes with a note
  "lower the ratchet to ...": the figures never go back up unnoticed once the file is lowered;
- a ratchet figure above the lowest it has been in any version of the file git holds fails (the
  working tree's, HEAD's and every commit's that changed it), so a raise cannot hide behind a
  later commit that touches the file again. Where git cannot tell (no repository) the check is
  skipped and a note says so; in a shallow clone it sees the versions the clone holds.

The figures are rounded to two decimals before any comparison, so float noise never fails a run.
radon over the package takes about 0.6 s (2,046 blocks); the git look-ups run only when a figure
is over or the file changed.
"""

from __future__ import annotations

import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "cube"
FIGURES = ("mean", "share_ge_11")
WORST_SHOWN = 10


@dataclass(frozen=True)
class Block:
    path: str  # "cube/method/evaluation.py"
    name: str  # "evaluate", "Class.method"
    line: int
    complexity: int


@dataclass(frozen=True)
class Figures:
    mean: float
    share_ge_11: float  # percent
    blocks: int
    high: int  # blocks at or over the threshold

    def value(self, name: str) -> float:
        return self.mean if name == "mean" else self.share_ge_11


# --------------------------------------------------------------------------- measuring


def blocks_of_source(path: str, source: str) -> list[Block]:
    """radon's blocks of one module's text (none when it does not parse)."""
    from radon.complexity import cc_visit

    try:
        found = cc_visit(source)
    except SyntaxError:
        return []
    return [Block(path, b.fullname, b.lineno, b.complexity) for b in found]


def package_blocks(root: Path) -> list[Block]:
    package = root / PACKAGE
    return [
        block
        for f in sorted(package.rglob("*.py"))
        for block in blocks_of_source(f.relative_to(root).as_posix(), f.read_text(encoding="utf-8"))
    ]


def figures(blocks: list[Block], threshold: int) -> Figures:
    count = len(blocks)
    high = sum(b.complexity >= threshold for b in blocks)
    mean = sum(b.complexity for b in blocks) / count if count else 0.0
    share = 100 * high / count if count else 0.0
    return Figures(round(mean, 2), round(share, 2), count, high)


# --------------------------------------------------------------------------- the ratchet file


@dataclass(frozen=True)
class Ratchet:
    rel: str  # the file, relative to the root
    threshold: int
    limits: dict[str, float]  # [ratchet]
    goal: dict[str, float]  # [goal]


def read_ratchet(rel: str, text: str) -> tuple[Ratchet | None, list[str]]:
    """The ratchet of the file's text, or the problems that make it unreadable (all of them)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        return None, [f"cannot parse: {err}"]
    problems: list[str] = []
    threshold = data.get("threshold", 11)
    if not isinstance(threshold, int) or threshold < 1:
        problems.append(f"`threshold` must be a positive integer, got {threshold!r}")
    tables: dict[str, dict[str, float]] = {}
    for table in ("ratchet", "goal"):
        section = data.get(table)
        if not isinstance(section, dict):
            problems.append(f"no [{table}] table: expected `mean` and `share_ge_11` in it")
            continue
        tables[table] = {}
        for name in FIGURES:
            value = section.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                problems.append(f"[{table}] `{name}` must be a number >= 0, got {value!r}")
            else:
                tables[table][name] = float(value)
    if problems:
        return None, problems
    return Ratchet(rel, int(threshold), tables["ratchet"], tables["goal"]), []


def _line_of(text: str, table: str, name: str) -> int:
    """The line of `name = ...` inside `[table]` of the ratchet file (1 if not found)."""
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            inside = stripped.startswith(f"[{table}]")
        elif inside and stripped.split("=")[0].strip() == name:
            return number
    return 1


# --------------------------------------------------------------------------- git


def _git(root: Path, *args: str) -> str | None:
    """git's output, or None when git cannot answer (no repository, unknown revision)."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _last_change(root: Path, rel: str) -> str | None:
    """The commit that last changed `rel` (None: never committed, or no git)."""
    out = _git(root, "log", "-1", "--format=%H", "--", rel)
    if out is None or not out.strip():
        return None
    return out.strip()


def past_versions(root: Path, rel: str, current: str) -> list[tuple[str, str]] | None:
    """(where, text) of every version git holds of the ratchet file, newest first: HEAD's when the
    working tree differs from it, then each commit that changed it (None: no git history)."""
    log = _git(root, "log", "--format=%H", "--", rel)
    if log is None:
        return None
    out = []
    head = _git(root, "show", f"HEAD:{rel}")
    if head is not None and head != current:
        out.append(("HEAD", head))
    for commit in log.split():
        text = _git(root, "show", f"{commit}:{rel}")
        if text is not None:
            out.append((commit[:10], text))
    return out or None


def changed_blocks(root: Path, rel: str, now: list[Block]) -> list[tuple[Block, int]] | None:
    """(block, its complexity then; 0 if new) for each block that is new, or more complex, since
    the commit that last set the ratchet (HEAD if the file was never committed); None when git
    cannot tell."""
    base = _last_change(root, rel) or "HEAD"
    tracked = _git(root, "diff", "--name-only", base, "--", PACKAGE)
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "--", PACKAGE)
    if tracked is None or untracked is None:
        return None
    worse: list[tuple[Block, int]] = []
    for path in sorted(set((tracked + untracked).split())):
        before: dict[str, int] = {}
        for block in blocks_of_source(path, _git(root, "show", f"{base}:{path}") or ""):
            before[block.name] = max(before.get(block.name, 0), block.complexity)
        worse += [
            (b, before.get(b.name, 0))
            for b in now
            if b.path == path and b.complexity > before.get(b.name, 0)
        ]
    return worse


# --------------------------------------------------------------------------- the rule


def _describe(block: Block, then: int | None = None) -> str:
    was = "" if then is None else " (new)" if then == 0 else f" (was {then})"
    return f"{block.path}:{block.line} `{block.name}` {block.complexity}{was}"


def _raised(root: Path, ratchet: Ratchet, text: str) -> tuple[list[tuple[int, str]], list[str]]:
    """Problems (line, message) for each figure above the lowest it has been in any version git
    holds (so a raise cannot hide behind a later commit that touches the file again); notes."""
    versions = past_versions(root, ratchet.rel, text)
    if versions is None:
        return [], [f"{ratchet.rel}: no previous version in git to compare the ratchet with"]
    lowest: dict[str, tuple[float, str]] = {}
    for where, old_text in versions:
        old, _ = read_ratchet(ratchet.rel, old_text)
        for name in FIGURES if old is not None else ():
            if name not in lowest or round(old.limits[name], 2) < lowest[name][0]:
                lowest[name] = (round(old.limits[name], 2), where)
    problems = [
        (
            _line_of(text, "ratchet", name),
            f"[ratchet] `{name}` raised from {lowest[name][0]:.2f} (git {lowest[name][1]}) to "
            f"{ratchet.limits[name]:.2f}: the ratchet only goes down; split the new complexity "
            "into named steps instead",
        )
        for name in FIGURES
        if name in lowest and round(ratchet.limits[name], 2) > lowest[name][0]
    ]
    return problems, []


def _over(
    root: Path, ratchet: Ratchet, measured: Figures, blocks: list[Block], text: str
) -> list[tuple[int, str]]:
    over = [n for n in FIGURES if measured.value(n) > round(ratchet.limits[n], 2)]
    if not over:
        return []
    worse = changed_blocks(root, ratchet.rel, blocks)
    if worse is None:
        high = sorted(blocks, key=lambda b: -b.complexity)
        heading = "the most complex blocks of the package (git cannot tell which are new)"
        shown = "; ".join(_describe(b) for b in high[:WORST_SHOWN])
    else:
        worse.sort(key=lambda pair: -pair[0].complexity)
        heading = "the most complex blocks that are new or more complex since the ratchet was set"
        shown = "; ".join(_describe(b, then) for b, then in worse[:WORST_SHOWN]) or "none"
    unit = {"mean": "", "share_ge_11": " %"}
    return [
        (
            _line_of(text, "ratchet", name),
            f"radon {name} of {PACKAGE}/ is {measured.value(name):.2f}{unit[name]}, over the "
            f"ratchet {ratchet.limits[name]:.2f}{unit[name]}: split blocks into named steps "
            f"(STYLE.md); {heading}: {shown}",
        )
        for name in over
    ]


def check(root: Path, rel: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(problems as (where, what), notes) of the radon rule over `root`."""
    path = root / rel
    if not path.is_file():
        return [(f"{rel}:1", "the radon ratchet file does not exist")], []
    text = path.read_text(encoding="utf-8")
    ratchet, unreadable = read_ratchet(rel, text)
    if ratchet is None:
        return [(f"{rel}:1", what) for what in unreadable], []
    blocks = package_blocks(root)
    measured = figures(blocks, ratchet.threshold)
    raised, notes = _raised(root, ratchet, text)
    problems = raised + _over(root, ratchet, measured, blocks, text)
    lower = {
        n: measured.value(n) for n in FIGURES if measured.value(n) < round(ratchet.limits[n], 2)
    }
    summary = (
        f"radon: mean {measured.mean:.2f} (ratchet {ratchet.limits['mean']:.2f}, goal "
        f"{ratchet.goal['mean']:.2f}), blocks >= {ratchet.threshold} {measured.high} of "
        f"{measured.blocks} = {measured.share_ge_11:.2f} % (ratchet "
        f"{ratchet.limits['share_ge_11']:.2f} %, goal {ratchet.goal['share_ge_11']:.2f} %)"
    )
    notes.append(summary)
    if lower and not problems:
        notes.append(
            "radon: lower the ratchet to "
            + ", ".join(f"{n} = {v:.2f}" for n, v in lower.items())
            + f" in {rel} [ratchet]"
        )
    return [(f"{rel}:{line}", what) for line, what in problems], notes

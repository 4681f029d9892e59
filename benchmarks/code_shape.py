"""The shape of the code and of the way in: the figures issue 27 measured, from one command.

    python benchmarks/code_shape.py [ROOT]

Prints the README's lines and words, the package's characters per line and lines over 100
characters, the mean cyclomatic complexity of its blocks and the share at 11 or more and at 20 or
more (radon's count, the issue's), the names the package makes public, and
the test folders. The last line is the headline: `mean_complexity: N`.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path


def readme_shape(root: Path) -> tuple[int, int]:
    text = (root / "README.md").read_text(encoding="utf-8")
    return len(text.splitlines()), len(text.split())


def line_shape(files: list[Path]) -> tuple[float, int, int]:
    lengths = [
        len(line)
        for f in files
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    over = sum(n > 100 for n in lengths)
    return sum(lengths) / len(lengths), over, len(lengths)


def complexities(package: Path) -> list[tuple[int, str]]:
    """Every block's cyclomatic complexity as radon counts it (functions, methods, classes)."""
    from radon.complexity import cc_visit

    return [
        (block.complexity, f"{f.relative_to(package.parent).as_posix()}:{block.name}")
        for f in sorted(package.rglob("*.py"))
        for block in cc_visit(f.read_text(encoding="utf-8"))
    ]


def mccabe_over(root: Path, package: Path, limit: int = 15) -> int:
    """Blocks over `limit` by mccabe's count (`ruff --select C901`, the house rule's check)."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    out = subprocess.run(
        [
            ruff,
            "check",
            "--isolated",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={limit}",
            "--output-format",
            "json",
            "--exit-zero",
            str(package),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    ).stdout
    return len(json.loads(out))


def public_names(files: list[Path]) -> int:
    count = 0
    for f in files:
        if f.name == "__init__.py":
            continue
        for node in ast.parse(f.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                names = []
            count += sum(not n.startswith("_") for n in names)
    return count


def folders_with_all(package: Path) -> tuple[int, int]:
    folders = [d for d in package.iterdir() if (d / "__init__.py").is_file() and d.name != "data"]
    declared = sum("__all__" in (d / "__init__.py").read_text(encoding="utf-8") for d in folders)
    return declared, len(folders)


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    package = root / "cube"
    files = sorted(package.rglob("*.py"))
    lines, words = readme_shape(root)
    per_line, over, total = line_shape(files)
    blocks = complexities(package)
    cc = [c for c, _ in blocks]
    declared, folders = folders_with_all(package)
    test_dirs = sorted(
        {p.parent.relative_to(root).as_posix() for p in root.glob("tests/**/test_*.py")}
    )
    print(f"readme_lines: {lines}")
    print(f"readme_words: {words}")
    print(f"characters_per_line: {per_line:.1f}  (non-blank lines of cube/**/*.py: {total})")
    print(f"lines_over_100: {over}")
    print(f"blocks: {len(cc)}")
    ge_11 = sum(c >= 11 for c in cc)
    print(f"blocks_cc_ge_11: {ge_11} ({100 * ge_11 / len(cc):.1f} %)")
    print(f"blocks_cc_ge_20: {sum(c >= 20 for c in cc)}")
    print("worst_blocks: " + ", ".join(f"{n} {c}" for c, n in sorted(blocks)[-5:][::-1]))
    print(f"mccabe_blocks_over_15: {mccabe_over(root, package)}")
    print(f"public_names: {public_names(files)}")
    print(f"folders_declaring_all: {declared} of {folders}")
    print(f"test_folders: {len(test_dirs)} ({', '.join(test_dirs)})")
    print(f"mean_complexity: {sum(cc) / len(cc):.2f}")


if __name__ == "__main__":
    main()

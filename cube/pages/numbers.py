"""Numbers on pages, formatted once.

Two kinds of number reach a page: a **figure** (a score, a difference, an interval end), shown
at a fixed number of decimals (`fixed`: the templates' `num` filter), and a **parameter** (a level
alpha, a threshold, a tolerance, a power), shown as a person would write it (`param`: the
templates' `param` filter). A parameter is often computed (alpha = 1 - confidence), and its
float repr carries the arithmetic's noise: a compare page printed `α = 0.050000000000000044`.
`param` writes it with 6 significant digits and no trailing zeros (`0.05`, `1e-05`, `200`),
which no parameter of the workbench needs more of.

A float a template prints without a filter goes through `param` too
(`cube.pages.escape.jinja_finalize`), so no page shows a raw float repr.
"""

from __future__ import annotations

import math
from typing import Any

PARAM_DIGITS = 6  # significant digits of a parameter: float noise sits near the 16th


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fixed(value: Any, digits: int = 2) -> str:
    """A figure at `digits` decimals (`71.33`); "n/a" for None, NaN, infinity or a non-number."""
    number = _finite(value)
    return "n/a" if number is None else f"{number:.{digits}f}"


def param(value: Any) -> str:
    """A parameter as written (`0.05`, `0.95`, `1e-05`, `200`), float noise removed; a whole
    number as an integer; "n/a" for None, NaN or infinity; a string or a bool as it is."""
    if isinstance(value, bool | str):
        return str(value)
    number = _finite(value)
    if number is None:
        return "n/a"
    if number.is_integer() and abs(number) < 10**PARAM_DIGITS:
        return str(int(number))
    return format(number, f".{PARAM_DIGITS}g")

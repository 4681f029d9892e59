"""A CJK font for the figures, shipped as a Python dependency and registered with matplotlib.

Matplotlib's own font (DejaVu Sans) has no Chinese glyphs: without help, every Chinese label
is drawn as empty boxes with a "Glyph ... missing" warning. The workbench depends on the
package `noto-cjk-sans-otc` (Noto Sans CJK Regular collection, SIL Open Font License 1.1,
about 15 MB wheel / 19 MB installed), so a fresh `pip install` or `make` brings the font with
it; no system package is needed. `setup_fonts` (run once on import) registers the
collection's Simplified Chinese face and makes it the fallback after the default Latin font
(`rcParams["font.family"] = [<default>, "Noto Sans CJK SC"]`): Latin text keeps its usual
look and each Chinese character falls back to Noto. Without the package a system CJK font
is used when one is installed; `renderable` tells whether a label can be drawn at all.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib import font_manager

# Families of CJK fonts a machine may have, tried when the packaged font is missing.
_SYSTEM_CJK = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Microsoft YaHei",
    "PingFang SC",
    "SimHei",
    "Noto Sans CJK JP",
)


def _packaged_font_file() -> Path | None:
    """The Noto Sans CJK collection shipped by `noto-cjk-sans-otc`; None without the package or
    file."""
    try:
        import noto_cjk_sans_otc
    except ImportError:
        return None
    path = Path(str(noto_cjk_sans_otc.FONT_PATH))
    return path if path.is_file() else None


def _packaged_cjk_font() -> tuple[str, Path] | None:
    """(family, file) of the Noto Sans CJK collection shipped by `noto-cjk-sans-otc`, registered."""
    path = _packaged_font_file()
    if path is None:
        return None
    font_manager.fontManager.addfont(str(path))
    families = [f.name for f in font_manager.fontManager.ttflist if Path(f.fname) == path]
    if not families:
        return None
    return ("Noto Sans CJK SC" if "Noto Sans CJK SC" in families else families[0]), path


def web_font_source() -> tuple[Path, int] | None:
    """(file, face number) of the packaged font's Simplified Chinese face, for the HTML pages'
    embedded web font (`cube.pages.webfont`); None without the package."""
    path = _packaged_font_file()
    if path is None:
        return None
    from fontTools.ttLib import TTCollection

    names = [f["name"].getDebugName(1) for f in TTCollection(str(path), lazy=True).fonts]
    return path, names.index("Noto Sans CJK SC") if "Noto Sans CJK SC" in names else 0


def _system_cjk_font() -> tuple[str, Path] | None:
    for family in _SYSTEM_CJK:
        for f in font_manager.fontManager.ttflist:
            if f.name == family:
                return family, Path(f.fname)
    return None


def _charmap(path: str | Path) -> frozenset[int]:
    from matplotlib.ft2font import FT2Font

    try:
        return frozenset(FT2Font(str(path)).get_charmap())
    except (OSError, RuntimeError, ValueError):
        return frozenset()


def setup_fonts() -> tuple[str | None, frozenset[int]]:
    """Register a CJK font as matplotlib's fallback after the default font.

    Returns:
        The CJK family in use (None when neither the packaged font nor a system CJK font is
        found) and the code points the fonts in use can draw.
    """
    base_path = font_manager.findfont(font_manager.FontProperties(), fallback_to_default=True)
    base = font_manager.get_font(base_path).family_name
    found = _packaged_cjk_font() or _system_cjk_font()
    glyphs = _charmap(base_path)
    if found is None:
        return None, glyphs
    family, path = found
    matplotlib.rcParams["font.family"] = [base, family]
    return family, glyphs | _charmap(path)


CJK_FONT, _GLYPHS = setup_fonts()  # family in use (None: no CJK font), drawable code points


def renderable(text: str) -> bool:
    """True when every character of `text` is ASCII or drawable by the registered fonts."""
    return text.isascii() or all(ord(c) in _GLYPHS or c.isspace() for c in text)

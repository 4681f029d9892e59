"""Evaluation dimensions: their prompt templates, their five criteria, and filling a prompt.

The paper's four dimensions (relevance, specificity, completeness, quality) ship as prompt
templates in `cube/prompts/<lang>/<name>.txt` (package data, Chinese and English). The
relevance prompt is the paper's, verbatim in English; the other three follow its form: five
criteria worth two points each, and a bare integer 0-10. The completeness criteria are the
paper's Table 7 human rubric. A template lists its criteria as lines `(1) ...` to `(5) ...`;
that listing is the single source of `dimension_criteria` (annotation sheets use it).

What a judge sees: the question, the gold (source) document of the question and the answer.
It is the same for the `zero`, `rag` and `full` sets, so the three scoring sets measure the
answers against one yardstick and the bounds are comparable. (Showing the `rag` answer its own
retrieved chunks would judge it against different material than the bounds.)

The three untrusted texts are placed in tagged blocks (`<question>`, `<source>`, `<answer>`)
with an instruction that their content is data, not instructions. Templates are filled by
literal placeholder replacement (`{question}`, `{document}`, `{answer}`), never `str.format`,
because documents and answers contain braces. Each dimension carries a `template_version`
(a short hash of its template text) that enters the LLM cache key, so an edited prompt is a
new call rather than a stale cache hit.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from cube.config.params import Params
from cube.config.sections import PAPER_DIMENSIONS
from cube.judges.parsing import declared_format, format_pattern

LANGS = ("zh", "en")
PLACEHOLDERS = ("{question}", "{document}", "{answer}")
_BLOCK_TAGS = ("question", "source", "answer")

# Short descriptions (paper section 4.1), shown in the all-dimensions prompt and in reports.
PAPER_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "en": {
        "relevance": "Is the answer relevant and faithful to the source material?",
        "specificity": "Does the answer respond to the question in a targeted way?",
        "completeness": "Does the answer provide all the necessary information from the source material?",
        "quality": "Is the answer clear and easy to understand?",
        "accuracy": "Is the answer accurate against the source (graded 1 / 0.5 / 0 as 10 / 5 / 0)?",
    },
    "zh": {
        "relevance": "回答是否与源材料相关、忠实于源材料？",
        "specificity": "回答是否有针对性地回应了问题？",
        "completeness": "回答是否提供了源材料中的全部必要信息？",
        "quality": "回答是否清晰、易于理解？",
        "accuracy": "对照源材料，回答是否准确（按 1 / 0.5 / 0 三级评分，记为 10 / 5 / 0）？",
    },
}


class DimensionError(ValueError):
    """A dimension that cannot be used: the message names it and says what is missing."""


@dataclass(frozen=True)
class Dimension:
    """One scoring dimension as a judge sees it.

    Attributes:
        name: The dimension's name (a column value of the scores table).
        description: One line saying what it measures.
        template: The prompt template with `{question}`, `{document}`, `{answer}` placeholders.
        template_version: Short hash of `template`; enters the LLM cache key.
        criteria: The five 2-point criteria, in order.
        lang: Prompt language, `zh` or `en`.
        score_format: The reply format the dimension declares (`"Verdict: {score}"`): its
            `score_format` param, else its template's first line holding `{score}`, else None
            (see `cube.judges.parsing`).
    """

    name: str
    description: str
    template: str
    template_version: str
    criteria: list[str] = field(default_factory=list)
    lang: str = "zh"
    score_format: str | None = None

    def fill(self, question: str, document: str, answer: str) -> str:
        """The prompt for one answer (see `fill_template`)."""
        return fill_template(self.template, question=question, document=document, answer=answer)


def template_version(text: str) -> str:
    """A short, stable hash of a template text (12 hex digits of SHA-256)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _check_lang(lang: str) -> None:
    if lang not in LANGS:
        raise DimensionError(f"unknown prompt language {lang!r}; expected one of {list(LANGS)}")


@lru_cache(maxsize=64)
def packaged_template(name: str, lang: str) -> str | None:
    """The packaged template `cube/prompts/<lang>/<name>.txt`, or None when there is none."""
    _check_lang(lang)
    res = resources.files("cube").joinpath("prompts", lang, f"{name}.txt")
    return res.read_text(encoding="utf-8") if res.is_file() else None


def parse_criteria(template: str) -> list[str]:
    """The criteria a template lists as lines `(1) ...` to `(n) ...` (ASCII or full-width brackets)."""
    found: list[tuple[int, str]] = []
    for line in template.splitlines():
        m = re.match(r"^\s*[(（](\d)[)）]\s*(.+?)\s*$", line)
        if m:
            found.append((int(m.group(1)), m.group(2)))
    # Only a clean 1..n run counts: numbered lines elsewhere in a custom prompt are not criteria.
    if [n for n, _ in found] != list(range(1, len(found) + 1)):
        return []
    return [text for _, text in found]


@lru_cache(maxsize=64)
def _packaged_criteria(name: str, lang: str) -> tuple[str, ...]:
    template = packaged_template(name, lang)
    if template is None:
        raise DimensionError(
            f"dimension {name!r} has no packaged prompt for lang {lang!r} "
            f"(packaged: {list(PAPER_DIMENSIONS)}); give its criteria in params"
        )
    return tuple(parse_criteria(template))


def dimension_criteria(name: str, lang: str) -> list[str]:
    """The five criteria wordings of a packaged dimension, in order (for annotation sheets).

    Args:
        name: One of the packaged dimensions (relevance, specificity, completeness, quality).
        lang: `zh` or `en`.

    Raises:
        DimensionError: the dimension has no packaged prompt in that language.
    """
    return list(_packaged_criteria(name, lang))


def _neutralise_tags(text: str) -> str:
    # An answer containing "</answer>" must not be able to close its block early and pose as
    # instructions; a zero-width space inside the tag keeps the text readable but inert.
    return re.sub(
        r"<(/?)\s*(" + "|".join(_BLOCK_TAGS) + r")\s*>",
        lambda m: f"<{m.group(1)}\u200b{m.group(2)}>",
        text,
        flags=re.IGNORECASE,
    )


def fill_template(template: str, **values: str) -> str:
    """Replace `{key}` placeholders by values, literally and in one pass.

    One pass (a regex over the template) rather than chained `str.replace`: a question that
    contains the text "{answer}" must stay as written, not receive the answer. Untrusted values
    have block tags neutralised. Placeholders without a value are left untouched.
    """
    keys = sorted(values, key=len, reverse=True)
    if not keys:
        return template
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in keys))
    clean = {
        k: _neutralise_tags(str(v)) if k in ("question", "document", "answer") else str(v)
        for k, v in values.items()
    }
    return pattern.sub(lambda m: clean[m.group(0)[1:-1]], template)


def _read_prompt_file(name: str, path_text: str, base_dir: Path) -> str:
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise DimensionError(f"dimension {name!r}: prompt_file {str(path)!r} not found")
    return path.read_text(encoding="utf-8")


def load_dimensions(params: Params, base_dir: Path = Path(".")) -> list[Dimension]:
    """The dimensions of a run, with their templates, criteria and template versions.

    A dimension's template is, in order: its inline `prompt`, its `prompt_file` (relative to
    `base_dir`), or the packaged template of that name in `params.lang`. Its criteria are the
    `criteria` given in params, else those its template lists, else the packaged ones. Its
    reply format is its `score_format`, else the template's first line holding `{score}`.

    Raises:
        DimensionError: naming the dimension, when it has no template, its template lacks the
            `{answer}` placeholder, it does not end up with exactly five criteria, or its reply
            format does not hold exactly one `{score}`.
    """
    lang = params.lang
    _check_lang(lang)
    dims: list[Dimension] = []
    for d in params.dimension_list():
        if d.prompt is not None and d.prompt_file is not None:
            raise DimensionError(
                f"dimension {d.name!r}: give either `prompt` or `prompt_file`, not both"
            )
        if d.prompt is not None:
            template = d.prompt
        elif d.prompt_file is not None:
            template = _read_prompt_file(d.name, d.prompt_file, base_dir)
        else:
            packaged = packaged_template(d.name, lang)
            if packaged is None:
                raise DimensionError(
                    f"dimension {d.name!r}: no packaged prompt template (packaged: {list(PAPER_DIMENSIONS)}); "
                    "give `prompt` (inline text) or `prompt_file` for this custom dimension"
                )
            template = packaged
        if "{answer}" not in template:
            raise DimensionError(
                f"dimension {d.name!r}: the prompt template has no {{answer}} placeholder "
                f"(placeholders: {', '.join(PLACEHOLDERS)})"
            )
        criteria = list(d.criteria) if d.criteria else parse_criteria(template)
        if not criteria and packaged_template(d.name, lang) is not None:
            criteria = dimension_criteria(d.name, lang)
        if len(criteria) != 5:
            raise DimensionError(
                f"dimension {d.name!r}: expected five criteria (from `criteria:` or lines '(1) ...' to "
                f"'(5) ...' in its prompt), found {len(criteria)}"
            )
        description = d.description or PAPER_DESCRIPTIONS[lang].get(d.name, "")
        score_format = d.score_format or declared_format(template)
        if score_format is not None:
            try:
                format_pattern(score_format)
            except ValueError as err:
                raise DimensionError(f"dimension {d.name!r}: {err}") from None
        dims.append(
            Dimension(
                d.name,
                description,
                template,
                template_version(template),
                criteria,
                lang,
                score_format,
            )
        )
    return dims


def all_dimensions_prompt(
    dimensions: list[Dimension], question: str, document: str, answer: str
) -> tuple[str, str]:
    """The one-call prompt that asks for every dimension as a JSON object.

    Returns:
        The filled prompt and its template version (a hash of the all-dimensions template and
        of every dimension's name, description and criteria, which the prompt spells out).
    """
    if not dimensions:
        raise DimensionError("all-dimensions prompt: no dimensions given")
    lang = dimensions[0].lang
    template = packaged_template("all_dimensions", lang)
    assert template is not None, "package data cube/prompts/*/all_dimensions.txt is missing"
    blocks = []
    for d in dimensions:
        lines = [f"[{d.name}] {d.description}".rstrip()]
        lines += [f"({i}) {c}" for i, c in enumerate(d.criteria, 1)]
        blocks.append("\n".join(lines))
    spec = "\n\n".join(blocks)
    keys = json.dumps({d.name: "<0-10>" for d in dimensions}, ensure_ascii=False)
    keys = re.sub(r'"<0-10>"', "<0-10>", keys)
    prompt = fill_template(
        template, dimensions=spec, keys=keys, question=question, document=document, answer=answer
    )
    return prompt, template_version(template + "\n" + spec)

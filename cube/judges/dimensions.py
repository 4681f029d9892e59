"""Evaluation dimensions: their prompt templates, their five criteria, and filling a prompt.

A dimension is one YAML file (`cube.config.dimension_files`): the packaged ones are
`cube/judges/dimensions/<name>.yaml` (relevance, specificity, completeness, quality: the paper's
four, and accuracy), a user's one is named by a params entry `{name: x, path: my/x.yaml}`. A
file holds the dimension's zh/en description and prompt template, its criteria ids, its advice
for the decision page, its position among the paper's four and its rubric rule. The relevance
prompt is the paper's, verbatim in English; the other three follow its form: five criteria
worth two points each, and a bare integer 0-10. The completeness criteria are the paper's
Table 7 human rubric. A template lists its criteria as lines `(1) ...` to `(5) ...`; that
listing is the single source of `dimension_criteria` (annotation sheets use it).

What a judge sees: the question, the gold (source) document of the question and the answer.
It is the same for the `zero`, `rag` and `full` sets, so the three scoring sets measure the
answers against one yardstick and the bounds are comparable. (Showing the `rag` answer its own
retrieved chunks would judge it against different material than the bounds.)

The layout is the one a prefix cache can reuse: the shared parts first, the answer last (the
dimension's instructions and rubric, the question, the gold document, then the answer and the
reply line), in one user message. Each fenced block's nonce is the hash of its own text, so the
answer's nonce appears only in the answer block; the zero, rag and full answers of one question
and dimension (and every system's rag answer) share the prompt up to `<answer-`, and
`cube.judges.scoring` sends a judge's calls in text order so that they follow each other. The
all-dimensions prompt (`all_dimensions_prompt`) has the same order. The question and document
come after the dimension's instructions, so two dimensions of one question share nothing beyond
the chat template; placing them before would serve more (benchmarks/prompt_prefix_layout.py:
0.87 of the text against 0.82) but moves the paper's verbatim prompt and every cache key.

The three untrusted texts are placed in fenced blocks (`<question-NONCE>`, `<source-NONCE>`,
`<answer-NONCE>`: `cube.config.fence`, whose nonce an answer cannot write, with tag-like text
inside neutralised) with an instruction that their content is data, not instructions, and that
a block ends only at the closing tag carrying its opening tag's code. Templates are filled by
literal placeholder replacement (`{question}`, `{document}`, `{answer}`), never `str.format`,
because documents and answers contain braces; a user's custom prompt gets the same blocks. Each
dimension carries a `template_version` (a short hash of its template text) that enters the LLM
cache key, so an edited prompt is a new call rather than a stale cache hit.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from cube.config.dimension_files import (
    DimensionFileError,
    DimensionSpec,
    packaged_dimensions,
    parse_criteria,
    user_dimension,
)
from cube.config.fence import fill_fenced
from cube.config.params import Params
from cube.config.sections import DimensionParams
from cube.judges.parsing import declared_format, format_pattern

LANGS = ("zh", "en")
PLACEHOLDERS = ("{question}", "{document}", "{answer}")


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
            `score_format` param (or its file's), else its template's first line holding
            `{score}`, else None (see `cube.judges.parsing`).
        rubric: The rubric judge's rule for it (its file's `rubric:`), else None: the rule
            registered under its name, if any (`cube.judges.rubric.rule`).
    """

    name: str
    description: str
    template: str
    template_version: str
    criteria: list[str] = field(default_factory=list)
    lang: str = "zh"
    score_format: str | None = None
    rubric: str | None = None

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
    """The packaged template of `name`: the dimension file's `prompt.<lang>`
    (`cube/judges/dimensions/<name>.yaml`), else the prompt `cube/prompts/<lang>/<name>.txt`
    (all_dimensions, answer, ...), or None when there is neither."""
    _check_lang(lang)
    spec = packaged_dimensions().get(name)
    if spec is not None:
        return spec.prompt.get(lang)
    res = resources.files("cube").joinpath("prompts", lang, f"{name}.txt")
    return res.read_text(encoding="utf-8") if res.is_file() else None


@lru_cache(maxsize=64)
def _packaged_criteria(name: str, lang: str) -> tuple[str, ...]:
    spec = packaged_dimensions().get(name)
    template = spec.prompt.get(lang) if spec is not None else None
    if template is None:
        raise DimensionError(
            f"dimension {name!r} has no packaged prompt for lang {lang!r} "
            f"(packaged: {list(packaged_dimensions())}); give its criteria in params"
        )
    return tuple(parse_criteria(template))


def dimension_criteria(name: str, lang: str) -> list[str]:
    """The five criteria wordings of a packaged dimension, in order (for annotation sheets).

    Args:
        name: One of the packaged dimensions (cube/judges/dimensions/*.yaml).
        lang: `zh` or `en`.

    Raises:
        DimensionError: the dimension has no packaged prompt in that language.
    """
    return list(_packaged_criteria(name, lang))


UNTRUSTED = {"question": "question", "document": "source", "answer": "answer"}  # key -> its tag


def fill_template(template: str, **values: str) -> str:
    """Replace `{key}` placeholders by values, literally and in one pass
    (`cube.config.fence.fill_fenced`).

    The untrusted values (`question`, `document`, `answer`) become fenced blocks
    (`<question-NONCE>`, `<source-NONCE>`, `<answer-NONCE>`, each NONCE the hash of its text,
    tag-like text inside neutralised), in a packaged template and in a user's custom one alike; the
    other values (`dimensions`, `keys`) go in as they are. A question that contains the text
    "{answer}" stays as written. Placeholders without a value are left untouched.
    """
    untrusted = {k: str(v) for k, v in values.items() if k in UNTRUSTED}
    trusted = {k: str(v) for k, v in values.items() if k not in UNTRUSTED}
    return fill_fenced(template, untrusted, trusted, tags=UNTRUSTED)


def _read_prompt_file(name: str, path_text: str, base_dir: Path) -> str:
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise DimensionError(f"dimension {name!r}: prompt_file {str(path)!r} not found")
    return path.read_text(encoding="utf-8")


def _spec(d: DimensionParams, base_dir: Path) -> DimensionSpec | None:
    """The dimension file of a params entry: its `path`, else the packaged file of its name."""
    if d.path is None:
        return packaged_dimensions().get(d.name)
    try:
        return user_dimension(d.name, d.path, base_dir)
    except DimensionFileError as err:
        raise DimensionError(str(err)) from None


def _template(d: DimensionParams, spec: DimensionSpec | None, lang: str, base_dir: Path) -> str:
    """A dimension's template: its inline `prompt`, its `prompt_file`, else its file's."""
    if d.prompt is not None and d.prompt_file is not None:
        raise DimensionError(
            f"dimension {d.name!r}: give either `prompt` or `prompt_file`, not both"
        )
    if d.prompt is not None:
        return d.prompt
    if d.prompt_file is not None:
        return _read_prompt_file(d.name, d.prompt_file, base_dir)
    if spec is not None and d.path is not None and lang not in spec.prompt:
        raise DimensionError(
            f"dimension file {spec.source}: key 'prompt.{lang}': missing (the run's lang is "
            f"{lang!r}; the file has {sorted(spec.prompt)})"
        )
    if spec is None or lang not in spec.prompt:
        raise DimensionError(
            f"dimension {d.name!r}: no packaged prompt template "
            f"(packaged: {list(packaged_dimensions())}); "
            "give `prompt` (inline text) or `prompt_file` for this custom dimension"
        )
    return spec.prompt[lang]


def _criteria(
    d: DimensionParams, spec: DimensionSpec | None, template: str, lang: str
) -> list[str]:
    """Its `criteria` in params, else those its template lists, else its file's template's."""
    criteria = list(d.criteria) if d.criteria else parse_criteria(template)
    if not criteria and spec is not None and lang in spec.prompt:
        criteria = parse_criteria(spec.prompt[lang])
    if len(criteria) != 5:
        raise DimensionError(
            f"dimension {d.name!r}: expected five criteria (from `criteria:` or lines "
            f"'(1) ...' to '(5) ...' in its prompt), found {len(criteria)}"
        )
    return criteria


def _dimension(d: DimensionParams, lang: str, base_dir: Path) -> Dimension:
    spec = _spec(d, base_dir)
    template = _template(d, spec, lang, base_dir)
    if "{answer}" not in template:
        raise DimensionError(
            f"dimension {d.name!r}: the prompt template has no {{answer}} placeholder "
            f"(placeholders: {', '.join(PLACEHOLDERS)})"
        )
    criteria = _criteria(d, spec, template, lang)
    description = d.description or (spec.description.get(lang, "") if spec else "")
    score_format = (
        d.score_format or (spec.score_format if spec else None) or declared_format(template)
    )
    if score_format is not None:
        try:
            format_pattern(score_format)
        except ValueError as err:
            raise DimensionError(f"dimension {d.name!r}: {err}") from None
    return Dimension(
        d.name,
        description,
        template,
        template_version(template),
        criteria,
        lang,
        score_format,
        spec.rubric if spec else None,
    )


def load_dimensions(params: Params, base_dir: Path = Path(".")) -> list[Dimension]:
    """The dimensions of a run, with their templates, criteria and template versions.

    A dimension's file is its `path` (a YAML file, or a folder holding `<name>.yaml`, relative
    to `base_dir`), else the packaged file of its name. Its template is, in order: its inline
    `prompt`, its `prompt_file` (relative to `base_dir`), or its file's template in
    `params.lang`. Its criteria are the `criteria` given in params, else those its template
    lists, else those its file's template lists. Its reply format is its `score_format`, else
    its file's, else the template's first line holding `{score}`.

    Raises:
        DimensionError: naming the dimension (or its file and key), when its file is bad, it
            has no template, its template lacks the `{answer}` placeholder, it does not end up
            with exactly five criteria, or its reply format does not hold exactly one `{score}`.
    """
    lang = params.lang
    _check_lang(lang)
    return [_dimension(d, lang, base_dir) for d in params.dimension_list()]


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

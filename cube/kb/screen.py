"""The screen of generated questions: garbage is caught before anything answers or judges it.

A small model asked to write a citizen's question often writes something else: the prompt's own
instructions echoed back ("The question must be answerable from this guide ..."), a URL, a
statement, the same question twice, or a question about nothing in particular. Issue 22 measured
it on a 135M model: 15 of 20 "questions" were instruction echoes and 2 were URLs; none was
rejected, and the run went on to answer and judge them for 40 minutes.

`screen_questions` gives every question the first reason it fails on, "" when usable:

- `instruction_echo`: half or more of its word 3-grams (Chinese: character 4-grams) appear in the
  question-writing prompt's own text (the template without the document);
- `url`: it holds a web address (http://, www., or a host name ending in a common top-level domain);
- `not_a_question`: no question mark and no question word at its start (English) / no question
  word or particle anywhere (Chinese), or longer than `MAX_WORDS` words (`MAX_CHARS` characters
  in Chinese): the prompt asks for one sentence of at most 30 words;
- `near_duplicate`: its words (Chinese: character bigrams) are those of an earlier usable question,
  or, for the same gold document, overlap them by a Jaccard similarity of `DUPLICATE_JACCARD` or
  more (the later one is dropped). Across documents only the same words count: questions about a
  family's variants ("... (Modification)?", "... (Cancellation)?") differ in one word and are
  different questions;
- `names_no_service`: it does not name the service its gold document describes (`item_name` and
  `aliases`; content words, Chinese: character bigrams) but another one, or nothing in particular
  (`_names_another_service`); skipped when the corpus has no item names. A citizen's own words pass:
  a family named without its variant, words the corpus never uses ("开网咖"), distinctive words the
  gold document holds (issue 23: the former "no shared word" rule rejected 29-43 % of them).

Only LLM-written questions are screened: the template generator's colloquial style deliberately
avoids the official name, and a user's own question file is theirs. The share of usable questions
below `questions.min_usable_share` stops the run with one line
(`cube.run.pipeline.questions_stage`). Measured error rate on known-truth cases:
`benchmarks/question_screen.py` (docs/measurements.md).
"""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

SCREEN_REASONS: tuple[str, ...] = (
    "instruction_echo",
    "url",
    "not_a_question",
    "near_duplicate",
    "names_no_service",
)
ECHO_SHARE = 0.5
DUPLICATE_JACCARD = 0.8
MAX_WORDS = 60
MAX_CHARS = 120
DISTINCT_SHARE = 0.05  # a word in at most this share of the documents tells services apart
# a name word in more of the distinct names (许可, 登记, registration) names no service alone
COMMON_NAME_SHARE = 0.1
ANOTHER_MIN = (
    2  # distinctive words of a question that one other document holds: it is that one's question
)
EXAMPLES = 3  # examples per reason on page 02

_URL = re.compile(
    r"https?://|www\.|\b[\w-]+\.(?:com|org|net|gov|edu|io|cn|uk|de|info)(?:/|\b)", re.IGNORECASE
)
_WORD = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_EN_QUESTION_WORDS = frozenset(
    "what how where when which who whom whose why can could do does did is are am was were should "
    "shall may might will would must have has any tell please".split()
)
_ZH_QUESTION_MARKS = (
    "吗",
    "呢",
    "什么",
    "怎么",
    "怎样",
    "如何",
    "哪",
    "几",
    "多少",
    "多久",
    "多长",
    "是否",
    "能否",
    "可否",
    "可以",
    "需要",
    "要不要",
    "有没有",
    "是不是",
    "为什么",
    "请问",
)
_ZH_FUNCTION_CHARS = frozenset(
    "我你您他她的了吗呢吧啊么什怎哪几多少请问想要需可以是否能该得去在有没这那个些和"
)
_EN_STOPWORDS = frozenset(
    "a an the of for and or to in on at by with from as is are be this that these those my our "
    "your its it i we you he she they me us do does did can could what how where when which who "
    "why apply application service services new".split()
)


def _zh(text: str) -> bool:
    return bool(_CJK.search(text))


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _bigrams(text: str) -> set[str]:
    chars = "".join(_CJK.findall(text))
    return {chars[i : i + 2] for i in range(len(chars) - 1)}


def _shingles(text: str) -> list[str]:
    """Word 3-grams (Chinese: character 4-grams) of a text, in order."""
    if _zh(text):
        chars = re.sub(r"\s+", "", text)
        return [chars[i : i + 4] for i in range(len(chars) - 3)]
    w = _words(text)
    return [" ".join(w[i : i + 3]) for i in range(len(w) - 2)]


def _tokens(text: str) -> set[str]:
    """The words of a question for near-duplicate comparison (Chinese: character bigrams)."""
    return _bigrams(text) | set(_words(text)) if _zh(text) else set(_words(text))


def _content(text: str) -> set[str]:
    """Content words of a service name (Chinese: character bigrams)."""
    if _zh(text):
        return _bigrams(text) | {w for w in _words(text) if len(w) >= 3}
    return {w for w in _words(text) if len(w) >= 3 and w not in _EN_STOPWORDS}


def instruction_shingles(prompt_template: str) -> frozenset[str]:
    """The prompt's own text as shingles (its `{document}` and `{focus}` placeholders left out)."""
    own = re.sub(
        r"<document>.*?</document>|\{document\}|\{focus\}|\{fence\}",
        " ",
        prompt_template,
        flags=re.DOTALL,
    )
    return frozenset(_shingles(own))


def _not_a_question(q: str) -> bool:
    if _zh(q):
        return len(re.sub(r"\s+", "", q)) > MAX_CHARS or not (
            q.rstrip().endswith(("?", "？")) or any(m in q for m in _ZH_QUESTION_MARKS)
        )
    words = _words(q)
    if not words or len(words) > MAX_WORDS:
        return True
    return not (q.rstrip().endswith("?") or words[0] in _EN_QUESTION_WORDS)


def service_words(corpus: pd.DataFrame) -> dict[str, tuple[set[str], set[str]]]:
    """Per document: the content words of its service's name and colloquial names (`aliases`), and
    those of its whole text (`text`, when present); empty without item names."""
    if "item_name" not in corpus.columns:
        return {}
    out = {}
    for rec in corpus.to_dict("records"):
        names = " ".join(str(rec.get(k) or "") for k in ("item_name", "aliases"))
        body = " ".join(str(rec.get(k) or "") for k in ("item_name", "aliases", "text"))
        if _content(names):
            out[str(rec["doc_id"])] = (_content(names), _content(body) | _tokens(body))
    return out


def _content_word(word: str) -> bool:
    """A word that can name something: English, 3+ letters and no stopword; Chinese, a bigram of
    neither a question word's nor a pronoun's character."""
    if _zh(word):
        return not (set(word) & _ZH_FUNCTION_CHARS)
    return len(word) >= 3 and word not in _EN_STOPWORDS and word not in _EN_QUESTION_WORDS


def _names_another_service(
    words: set[str],
    doc: str,
    service: dict[str, tuple[set[str], set[str]]],
    df: Counter[str],
    name_df: Counter[str],
) -> bool:
    """Whether a question names no service of its gold document (see the module doc):

    1. it says a word of its service's name or aliases that at most `COMMON_NAME_SHARE` of the
       distinct names hold (not only 许可, 登记, "registration"): it names its service (False);
    2. another document's name or aliases share more of its words than the gold's, and at least
       `ANOTHER_MIN`: it names that other service (True);
    3. it shares common name words only, and no other name shares more: a family's service said
       without its variant (False);
    4. otherwise by its distinctive words (in at most `DISTINCT_SHARE` of the documents): none but
       words unknown to the corpus ("开网咖": a citizen's own words) passes, none at all ("What time
       is it?") names nothing (True); the gold document holding one passes; another document holding
       `ANOTHER_MIN` of them while the gold holds none asks about that one (True)."""
    name, body = service[doc]
    shared = name & words
    if _says_a_rare_name_word(shared, name_df):
        return False
    closest = max((len(other & words) for d, (other, _) in service.items() if d != doc), default=0)
    if closest > len(shared) and closest >= ANOTHER_MIN:
        return True
    if shared:
        return False
    return _distinctive_words_name_another(words, doc, body, service, df)


def _says_a_rare_name_word(shared: set[str], name_df: Counter[str]) -> bool:
    """Rule 1: one of the words shared with its service's name is held by at most
    `COMMON_NAME_SHARE` of the distinct names."""
    common = max(1, COMMON_NAME_SHARE * name_df.total)  # type: ignore[attr-defined]
    return any(name_df[w] <= common for w in shared)


def _distinctive_words_name_another(
    words: set[str],
    doc: str,
    body: set[str],
    service: dict[str, tuple[set[str], set[str]]],
    df: Counter[str],
) -> bool:
    """Rule 4: by the question's distinctive words (in at most `DISTINCT_SHARE` of the
    documents)."""
    cap = max(1, DISTINCT_SHARE * len(service))
    distinctive = {w for w in words if 0 < df.get(w, 0) <= cap}
    if not distinctive:
        return not any(df.get(w, 0) == 0 and _content_word(w) for w in words)
    if len(distinctive) < ANOTHER_MIN or distinctive & body:
        return False
    return any(
        len(distinctive & other) >= ANOTHER_MIN for d, (_, other) in service.items() if d != doc
    )


def screen_questions(
    questions: pd.DataFrame, corpus: pd.DataFrame, prompt_template: str
) -> pd.Series:
    """Per question (index of `questions`): the first screen reason it fails on, "" when usable.

    Args:
        questions: `question` and `doc_id` columns (rows with an empty question are left "": they
            failed before the screen and say why in their own `error`).
        corpus: `doc_id` and, when present, `item_name` (the service a gold document describes).
        prompt_template: the question-writing prompt the questions came from.
    """
    echo = instruction_shingles(prompt_template)
    names = service_words(corpus)
    df, name_df = _word_counts(names)
    texts = questions["question"].fillna("").astype(str).str.strip().tolist()
    docs = questions["doc_id"].astype(str).tolist()
    earlier = _Earlier([_tokens(t) for t in texts])
    reasons = []
    for i, q in enumerate(texts):
        if not q:
            reasons.append("")
            continue
        reason = _form_reason(q, echo)
        if not reason:
            reason = earlier.reason(i, docs[i], names, df, name_df)
        reasons.append(reason)
    return pd.Series(reasons, index=questions.index, dtype=object, name="screen")


def _word_counts(
    names: dict[str, tuple[set[str], set[str]]],
) -> tuple[Counter[str], Counter[str]]:
    """In how many documents each word is, and in how many distinct service names (a name offered
    in 50 regions counts once; `.total` holds their number)."""
    df = Counter(w for _, body in names.values() for w in body)
    distinct = {frozenset(name) for name, _ in names.values()}
    name_df = Counter(w for name in distinct for w in name)
    name_df.total = len(distinct)  # type: ignore[attr-defined]
    return df, name_df


def _form_reason(question: str, echo: set) -> str:
    """The reason a question fails on by its form alone ("" if none): it echoes the instructions,
    holds a URL, or is not a question."""
    shingles = _shingles(question)
    if shingles and sum(s in echo for s in shingles) >= ECHO_SHARE * len(shingles):
        return "instruction_echo"
    if _URL.search(question):
        return "url"
    if _not_a_question(question):
        return "not_a_question"
    return ""


class _Earlier:
    """The usable questions so far, found by their two rarest tokens (the same words anywhere
    share them) and by their gold document (a near copy of the same document may not: a rare
    word added makes new rarest tokens, so it is compared with all of them)."""

    def __init__(self, token_sets: list[set[str]]) -> None:
        self.token_sets = token_sets
        self.freq = Counter(t for s in token_sets for t in s)
        self.buckets: dict[str, list[int]] = {}  # rarest token -> earlier usable questions
        self.by_doc: dict[str, list[int]] = {}  # gold document -> its earlier usable questions

    def reason(
        self,
        i: int,
        doc: str,
        names: dict[str, tuple[set[str], set[str]]],
        df: Counter[str],
        name_df: Counter[str],
    ) -> str:
        """Question i's reason by its words ("" when usable, and then it is remembered)."""
        mine = self.token_sets[i]
        keys = sorted(mine, key=lambda t: (self.freq[t], t))[:2]
        if self._near_duplicate(mine, keys, doc):
            return "near_duplicate"
        if doc in names and _names_another_service(mine, doc, names, df, name_df):
            return "names_no_service"
        for k in keys:
            self.buckets.setdefault(k, []).append(i)
        self.by_doc.setdefault(doc, []).append(i)
        return ""

    def _near_duplicate(self, mine: set[str], keys: list[str], doc: str) -> bool:
        sets = self.token_sets
        if any(mine == sets[j] for k in keys for j in self.buckets.get(k, [])):
            return True
        return any(
            len(mine & sets[j]) >= DUPLICATE_JACCARD * len(mine | sets[j])
            for j in self.by_doc.get(doc, [])
        )


def screen_table(questions: pd.DataFrame, reasons: pd.Series) -> pd.DataFrame:
    """Page 02's table: per reason, the count, the share and up to `EXAMPLES` examples. `usable` is
    a question with no screen reason and no `error`; `generation_failed` one without a screen reason
    whose generation failed (its `error`, such as "call failed: timeout", is its example)."""
    n = len(questions)
    errors = (
        questions["error"].fillna("").astype(str)
        if "error" in questions.columns
        else pd.Series("", index=questions.index)
    )
    failed = reasons.eq("") & errors.ne("") & ~errors.str.startswith("screen: ")
    rows = []
    for reason in ("", "generation_failed", *SCREEN_REASONS):
        if reason == "generation_failed":
            hit, shown = failed, errors
        else:
            hit, shown = (reasons == reason) & ~failed, questions["question"].astype(str)
        examples = shown[hit].head(EXAMPLES).map(lambda s: s[:120]).tolist()
        rows.append(
            {
                "reason": reason or "usable",
                "questions": int(hit.sum()),
                "share": float(hit.sum() / n) if n else float("nan"),
                "examples": " | ".join(examples),
            }
        )
    return pd.DataFrame(rows)

"""The `extractive` answerer: a deterministic algorithm, NOT a language model.

It stands in for the answering LLM when a run must be offline (the demo params, tests). It
reads the structured request context `{question, documents, lang}` (documents = rendered
service guides in rank order) and never the chat messages:

1. Asked fields: keywords in the question select knowledge-base fields (材料/materials ->
   application materials, 多久/how long -> the time limits, 收费/fee -> fee standard, ...).
   A question that names none gets a summary of the key fields.
2. Document choice: the retrieved guide whose item name shares the most tokens with the
   question (Chinese: character bigrams; English: lower-cased words), ties going to the
   higher rank. A near-duplicate item (same name plus "(Modification)") that ranks higher
   therefore wins a question about the base item: the confusion real systems show.
3. Answer: a sentence naming the chosen item, then each asked field's value copied from the
   guide (numbered lists kept); a field the guide lacks, or fills with a placeholder (无, /),
   is said to be missing; a yes/no flag or a bare time limit is phrased (`cube.config.phrasing`:
   "收费标准：需要收费", "承诺办结时限：10个工作日").
4. Decline (the answer says it cannot answer, `DECLINE`): when the question names an item
   (`named_item`: a leading name ending in an item suffix such as 许可/核发/登记/备案, not in a
   citizen's own words such as 要是想给锅炉登记) that no
   retrieved guide's item name contains or is contained in, or when it names a province
   (`X省` / `X Province`) that no retrieved guide mentions: the knowledge base does not cover
   what was asked, so the answerer declines rather than answer about another item or region.
   A question that names no item (a citizen's own words) is answered as in 2-3.
5. No documents (the `zero` set): a generic answer, the kind a model without the knowledge
   base can give (consult the service hall / portal; bring an ID), with no specific
   material, time limit or fee.

Its answers are extracts, so judges that reward fluency will rate it below an LLM; it is
useful for checking the pipeline and the bounds logic, not as a model of answer quality.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from cube.config.phrasing import phrase_value
from cube.config.schema import CORPUS_FIELDS, FIELD_LABELS
from cube.kb.document import parse_document as corpus_parse
from cube.llm import OfflineModel, Request, Response, register_offline

# Keyword -> fields. Order matters only for the order fields are written in the answer.
FIELD_KEYWORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "zh": {
        "application_materials": (
            "材料",
            "证件",
            "资料",
            "带什么",
            "准备什么",
            "提交什么",
            "提供什么",
        ),
        "requirements": ("条件", "资格", "符合", "要求", "什么情况下"),
        "procedure": ("流程", "步骤", "程序", "手续", "怎么办", "如何办", "怎么申请", "如何申请"),
        "statutory_time_limit": (
            "法定",
            "时限",
            "多久",
            "多长时间",
            "几天",
            "多少天",
            "工作日",
            "办结",
            "办完",
            "期限",
        ),
        "committed_time_limit": (
            "承诺",
            "时限",
            "多久",
            "多长时间",
            "几天",
            "多少天",
            "工作日",
            "办结",
            "办完",
            "期限",
        ),
        "fee_standard": ("收费", "费用", "多少钱", "交钱", "缴费", "免费", "收不收费", "花钱"),
        "processing_location": ("地点", "在哪", "哪里办", "去哪", "地址", "窗口"),
        "legal_basis": ("依据", "法律", "法规", "政策规定", "根据什么"),
        "online_handling": ("网上", "网办", "线上", "在线", "网络"),
        "consultation_method": ("电话", "咨询", "联系", "热线"),
        "processing_time": ("办理时间", "几点", "上班", "工作时间", "开放时间", "什么时间"),
        "handling_agency": ("哪个部门", "哪个单位", "实施主体", "谁负责", "哪个机关", "受理机关"),
        "department": ("部门名称",),
        "service_object": ("服务对象", "谁可以", "哪些人", "适用对象"),
        "processing_type": ("办件类型", "即办", "承诺件"),
    },
    "en": {
        "application_materials": (
            "material",
            "documents do i",
            "documents are",
            "bring",
            "submit",
            "paperwork",
        ),
        "requirements": ("requirement", "eligib", "condition", "qualif", "criteria"),
        "procedure": (
            "procedure",
            "step",
            "how do i apply",
            "how to apply",
            "how can i apply",
            "process for",
        ),
        "statutory_time_limit": (
            "statutory",
            "time limit",
            "how long",
            "how many days",
            "longest",
            "deadline",
        ),
        "committed_time_limit": (
            "committed",
            "time limit",
            "how long",
            "how many days",
            "working days",
            "how soon",
            "deadline",
        ),
        "fee_standard": ("fee", "cost", "charge", "pay", "price", "free of"),
        "processing_location": ("where", "location", "address", "which office", "counter"),
        "legal_basis": ("legal", "laws", "regulation", "statute"),
        "online_handling": ("online", "internet", "website"),
        "consultation_method": ("phone", "telephone", "contact", "hotline", "call"),
        "processing_time": (
            "hours",
            "opening",
            "open on",
            "when can i",
            "working time",
            "office time",
        ),
        "handling_agency": (
            "agency",
            "which department",
            "authority",
            "who handles",
            "who is responsible",
        ),
        "department": ("department name",),
        "service_object": ("service object", "who can apply", "who may apply", "applicable to"),
        "processing_type": ("processing type", "type of processing"),
    },
}
SUMMARY_FIELDS = (
    "handling_agency",
    "application_materials",
    "committed_time_limit",
    "fee_standard",
    "processing_location",
)

GENERIC_ANSWER = {
    "zh": (
        "您好，关于您咨询的事项，我目前没有可供参考的办事指南，"
        "无法提供该事项具体的申请材料、办理时限和收费标准。"
        "一般来说，办理政务服务事项通常需要携带本人有效身份证件及相关申请材料。"
        "建议您前往当地政务服务大厅窗口咨询，"
        "或登录当地政务服务网查询该事项的办事指南，也可以拨打 12345 政务服务便民热线确认。"
    ),
    "en": (
        "I do not have the service guide for this item at hand, so I cannot give its specific "
        "application materials, time limits or fees. In general, applying for a government service "
        "requires a valid identity document and the supporting materials for the item. Please "
        "consult the local government service hall, check the service guide on the official "
        "government service portal, or call the local government service hotline to confirm."
    ),
}
_INTRO = {
    "zh": "关于“{item}”，根据办事指南：",
    "en": 'Regarding "{item}", according to the service guide:',
}
_MISSING = {"zh": "指南中未载明", "en": "not stated in the guide"}
_SEP = {"zh": "：", "en": ": "}
_EN_STOP = frozenset(
    "a an the of for to and or in on at by with from is are do does i my me what how".split()
)


@lru_cache(maxsize=20_000)
def parse_document(text: str) -> MappingProxyType[str, str]:
    """Field values of a rendered key-value guide (`cube.kb.corpus.parse_document`, lenient),
    read-only. Memoised per text: a guide is read by every answer that retrieved it (the paper's
    scale parsed 54,020 guides for 6,111 distinct ones, 5 s of stage 02); the kernel's reset
    empties the memo between stages (`cube.run.kernel`)."""
    return MappingProxyType(corpus_parse(text, strict=False))


def asked_fields(question: str, lang: str) -> list[str]:
    """The fields a question asks about, in `CORPUS_FIELDS` order; empty when none is named."""
    q = question.lower()
    if lang == "en":  # keywords match at a word start ("fee" in "fees", not in "coffee")
        hits = {
            f
            for f, kws in FIELD_KEYWORDS[lang].items()
            if any(re.search(rf"\b{re.escape(k)}", q) for k in kws)
        }
    else:
        hits = {f for f, kws in FIELD_KEYWORDS[lang].items() if any(k in q for k in kws)}
    return [f for f in CORPUS_FIELDS if f in hits]


def name_tokens(text: str, lang: str) -> set[str]:
    """Tokens for item-name matching: character bigrams (zh) or content words (en)."""
    if lang == "zh":
        chars = re.sub(r"[\W_]+", "", text)
        return {chars[i : i + 2] for i in range(len(chars) - 1)} or ({chars} if chars else set())
    return {w for w in re.findall(r"\w+", text.lower()) if w not in _EN_STOP}


def pick_document(question: str, docs: list[Mapping[str, str]], lang: str) -> int:
    """Index of the document whose item name best matches the question (ties: higher rank)."""
    q = name_tokens(question, lang)
    best, best_score = 0, -1
    for i, fields in enumerate(docs):
        score = len(q & name_tokens(fields.get("item_name", ""), lang))
        if score > best_score:  # strict: an equal score keeps the earlier (higher-ranked) document
            best, best_score = i, score
    return best


def _format_field(field: str, value: str | None, lang: str) -> str:
    """ "label：value", the value said as `cube.config.phrasing.phrase_value` says it (是 -> 收费,
    10 -> 10个工作日, a placeholder such as 无 -> not stated), the way the template questions
    ask it."""
    label = FIELD_LABELS[lang][field]
    value = phrase_value(field, value, lang) or _MISSING[lang]
    if "\n" in value:
        return f"{label}{_SEP[lang]}\n{value}"
    return f"{label}{_SEP[lang]}{value}"


DECLINE = {
    "zh": "抱歉，检索到的办事指南中没有找到您所问的事项（{what}），无法回答，建议咨询 12345 "
    "政务服务便民热线。",
    "en": "Sorry, I cannot answer: the retrieved service guides do not cover what you asked about "
    "({what}). Please consult the local government service hotline.",
}
_ITEM_SUFFIX = (
    "许可|核发|登记|备案|认定|审批|审核|核准|换领|注销|"
    "变更|补办|延续|年检|鉴定|确认|给付|申领|换发|补发"
)
_NAMED_ITEM = re.compile(
    rf"^(?:我(?:想|要)(?:办理|申请)?)?([\u4e00-\u9fff（）()]{{2,30}}?(?:{_ITEM_SUFFIX})(?:（[^）]*）)?)"
    r"(?=的|需要|要|怎么|如何|在|收费|多久|是否|可以|有|，|？|\?|$)"
)
_COLLOQUIAL = re.compile(r"[给想我您把让咱]|要是|如果|准备")
_PROVINCE = {
    "zh": re.compile(r"([\u4e00-\u9fff]{2}省)"),
    "en": re.compile(r"\b([A-Z][a-z]+ Province)\b"),
}


def named_item(question: str, lang: str) -> str | None:
    """The item a question names at its start (zh: a name ending in an item suffix), else None."""
    if lang != "zh":
        return None
    m = _NAMED_ITEM.match(question.strip())
    if not m or _COLLOQUIAL.search(
        m.group(1)
    ):  # a citizen's own words ("要是想给锅炉登记") name no item
        return None
    return m.group(1)


def decline_reason(
    question: str, documents: list[str], parsed: list[Mapping[str, str]], lang: str
) -> str | None:
    """What the retrieved guides do not cover (the named item or province), or None (see step 4)."""
    item = named_item(question, lang)
    if item:
        from cube.config.phrasing import base_name

        names = [
            n
            for p in parsed
            for n in {p.get("item_name", ""), base_name(p.get("item_name", ""))}
            if n
        ]
        if not any(item in n or n in item for n in names):
            return item
    m = _PROVINCE[lang].search(question)
    if m and not any(m.group(1) in d for d in documents):
        return m.group(1)
    return None


def extractive_answer(question: str, documents: list[str], lang: str) -> tuple[str, dict[str, Any]]:
    """The answer text and a detail record (chosen rank, fields written).

    Args:
        question: the citizen's question.
        documents: rendered guides in rank order (empty for the `zero` set).
        lang: `zh` or `en`: the language of the answer.
    """
    if lang not in GENERIC_ANSWER:
        raise ValueError(f"extractive answerer: unsupported lang {lang!r}; expected 'zh' or 'en'")
    if not documents:
        return GENERIC_ANSWER[lang], {"picked_rank": 0, "fields": []}
    parsed = [parse_document(d) for d in documents]
    missing = decline_reason(question, documents, parsed, lang)
    if missing:
        return DECLINE[lang].format(what=missing), {
            "picked_rank": 0,
            "fields": [],
            "declined": missing,
        }
    i = pick_document(question, parsed, lang)
    chosen = parsed[i]
    fields = asked_fields(question, lang) or list(SUMMARY_FIELDS)
    item = chosen.get("item_name") or str(documents[i]).strip().splitlines()[0][:80]
    lines = [_INTRO[lang].format(item=item)]
    lines += [_format_field(f, chosen.get(f), lang) for f in fields]
    return "\n".join(lines), {"picked_rank": i + 1, "fields": fields}


@register_offline("extractive")
class ExtractiveAnswerer(OfflineModel):
    """Offline answerer (deterministic extraction, not an LLM); see the module docstring.

    Reads `request.context`: `question` (str), `documents` (list of rendered guides in rank
    order) and `lang` (`zh`/`en`, default `zh`).
    """

    def respond(self, request: Request) -> Response:
        ctx = request.context
        if "question" not in ctx:
            return Response(
                text=None, error="extractive answerer: request.context has no 'question'"
            )
        lang = ctx.get("lang") or "zh"
        text, detail = extractive_answer(
            str(ctx["question"]), list(ctx.get("documents") or []), lang
        )
        return Response(text=text, detail=detail)

"""How a citizen says an official service name, for the template questions (`cube.kb.questions`).

Official names quote qualifiers in nested brackets
("残疾人证换领（残疾类别（等级）未发生变化、档案齐全（居住地申请））") and end in an administrative
verb ("机动车驾驶证补领"); a citizen says neither. Here:

- `flatten_brackets`: a qualifier said at one bracket level ("换领（残损换新、户籍地）");
- `qualifier_of`: the qualifier alone, flattened (or the variant when the name holds none);
- `keyword_form`: the name with its closing verb said first, colloquially ("补办机动车驾驶证"),
  from `KEYWORD_FORMS`; "" when the name ends in no verb there;
- `tidy_question`: no doubled particles ("的的") or punctuation that joining phrases can leave.
"""

from __future__ import annotations

import re

from cube.config.phrasing import base_name

# How a citizen says an official name ending in one of these verbs ({o}: the rest of the name),
# longest first: "机动车驾驶证补领" -> "补办机动车驾驶证", "最低生活保障审核确认" ->
# "申请最低生活保障".
KEYWORD_FORMS: tuple[tuple[str, str], ...] = (
    ("参保登记", "参加{o}"),
    ("设立登记", "注册{o}"),
    ("变更登记", "变更{o}的登记"),
    ("注销登记", "注销{o}"),
    ("资料查询", "查{o}资料"),
    ("审核确认", "申请{o}"),
    ("核发", "办{o}"),
    ("换领", "换{o}"),
    ("补领", "补办{o}"),
    ("补办", "补办{o}"),
    ("新办", "新办{o}"),
    ("迁移", "迁移{o}"),
    ("许可", "办{o}许可证"),
    ("适配", "配{o}"),
    ("查询", "查{o}"),
    ("审批", "报批{o}"),
    ("核准", "报批{o}"),
    ("备案", "报备{o}"),
    ("认定", "申请认定{o}"),
    ("注销", "注销{o}"),
    ("变更", "变更{o}"),
    ("延续", "延续{o}"),
    ("申请", "申请{o}"),
    ("登记", "登记{o}"),
)  # every form but 许可's rewords the name: a citizen asks for a 许可证 by the permit's own name


def keyword_form(base: str) -> str:
    """The official name (without qualifiers) as a citizen says it: its closing verb first and
    colloquial ("残疾人证换领" -> "换残疾人证"); "" when the name ends in no verb of `KEYWORD_FORMS`
    or nothing is left besides it."""
    for suffix, form in KEYWORD_FORMS:
        if base.endswith(suffix) and len(base) > len(suffix) + 1:
            return form.replace("{o}", base[: -len(suffix)])
    return ""


def flatten_brackets(text: str) -> str:
    """Nested brackets said at one level: an inner "（" becomes "、", an inner "）" disappears
    ("残损换新（户籍地）" inside a qualifier -> "残损换新、户籍地")."""
    out, depth = [], 0
    for ch in text:
        if ch in "（(":
            depth += 1
            if depth > 1:
                if out and out[-1] not in "、，,":
                    out.append("、")
                continue
        elif ch in "）)":
            depth -= 1
            if depth >= 1:
                continue
        out.append(ch)
    return "".join(out)


def qualifier_of(name: str, variant: str = "") -> str:
    """The bracketed qualifier of an official name, said at one level ("（残损换新（户籍地））" ->
    "残损换新、户籍地"), or the variant when the name holds none; "" for neither."""
    base = base_name(name)
    if base != name:
        return flatten_brackets(name[len(base) :].strip())[1:-1].strip("、 ")
    return variant


def tidy_question(text: str) -> str:
    """A question without doubled particles ("的的", "，，") that joining phrases can produce."""
    text = re.sub(r"的{2,}", "的", text)
    return re.sub(r"([，、。？])\1+", r"\1", text)

"""An offline call's id is the same value however it is computed.

The id keys the users' call caches (a changed id re-sends paid calls), so the spliced path (a
request carrying a list of long texts, the extractive answerer's documents) must hash exactly the
bytes the plain formula hashes: `canonical_json([name, options, context, template_version,
sample])`, each top-level text over 64 characters replaced by its digest.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cube.config.model_spec import ModelSpec
from cube.llm import OfflineModel, Request, Response
from cube.llm.cache import canonical_json


def _reference_id(model: OfflineModel, request: Request) -> str:
    """The call id's definition, written out once (what the cached ids were made with)."""
    context = {
        k: "sha256:" + hashlib.sha256(v.encode()).hexdigest()
        if isinstance(v, str) and len(v) > 64
        else v
        for k, v in request.context.items()
    }
    payload = [model.name, model.spec.options, context, request.template_version, request.sample]
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def _model(options: dict[str, Any] | None = None) -> OfflineModel:
    return OfflineModel(ModelSpec(provider="offline", model="extractive", options=options or {}))


_LONG = st.text(min_size=65, max_size=300)  # past the 64-character digest threshold
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=80),
)
_NESTED = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# lists of long texts (spliced), with other items mixed in after the first
_TEXT_LIST = st.tuples(_LONG, st.lists(st.one_of(_LONG, _NESTED), max_size=6)).map(
    lambda t: [t[0], *t[1]]
)


@settings(max_examples=300, deadline=None)
@given(
    context=st.dictionaries(
        st.text(max_size=12), st.one_of(_TEXT_LIST, _NESTED, _LONG), max_size=6
    ),
    version=st.text(max_size=20),
    sample=st.integers(min_value=0, max_value=9),
    options=st.dictionaries(st.text(max_size=6), _SCALAR, max_size=3),
)
def test_call_id_equals_its_definition(context, version, sample, options) -> None:
    model = _model(options)
    request = Request(messages=(), context=context, template_version=version, sample=sample)
    assert model._call_id(request) == _reference_id(model, request)


def test_documents_request_ids_are_unchanged_and_distinct() -> None:
    """The answerer's request (non-ASCII documents, quotes, control characters, floats and nested
    lists beside them) hashes to the definition's value; a change to one document changes it."""
    docs = [
        "明川省丹江市的集体土地所有权首次登记（新办）" * 4,
        'A "quoted" guide\nwith a tab\t, a backslash \\ and an emoji 🙂 ' * 2,
        "é" * 70,
    ]
    context = {
        "question": "能不能网上申请？",
        "documents": docs,
        "lang": "zh",
        "weights": [0.1, 1e-300, 2.5e17, -0.0],
        "nested": [[1, [2, "x"]], {"b": 1, "a": [None, True]}],
    }
    model = _model({"top": 3, "ratio": 0.25})
    first = Request(messages=(), context=context, template_version="answer-1", sample=1)
    assert model._call_id(first) == _reference_id(model, first)
    changed = dict(context, documents=[*docs[:2], docs[2] + "!"])
    second = Request(messages=(), context=changed, template_version="answer-1", sample=1)
    assert model._call_id(second) == _reference_id(model, second)
    assert model._call_id(second) != model._call_id(first)


_TEXT_OR_NONE = st.one_of(st.none(), st.text(max_size=80), _LONG)


@settings(max_examples=300, deadline=None)
@given(
    context=st.dictionaries(st.text(max_size=12), _TEXT_OR_NONE, max_size=8),
    version=st.one_of(st.text(max_size=20), st.none(), st.integers()),
    sample=st.one_of(st.integers(min_value=-3, max_value=9), st.booleans()),
    options=st.dictionaries(st.text(max_size=6), _SCALAR, max_size=3),
)
def test_a_context_of_texts_has_the_definition_s_id(context, version, sample, options) -> None:
    """The joined path of a context of texts and Nones (the rubric judge's) hashes the
    definition's bytes, whatever the texts (non-ASCII, quotes, control characters, empty, over
    the digest threshold), the template version and the sample (True is not 1 in JSON)."""
    model = _model(options)
    request = Request(messages=(), context=context, template_version=version, sample=sample)
    assert model._call_id(request) == _reference_id(model, request)
    again = Request(messages=(), context=dict(context), template_version=version, sample=sample)
    assert model._call_id(again) == _reference_id(model, request)  # and so from its memos
    # with the head a batch makes once (`OfflineModel._batch`)
    assert model._call_id(again, model._id_head()) == _reference_id(model, request)


def test_the_rubric_judge_s_context_has_the_definition_s_id() -> None:
    """A judge's context (Chinese texts, a digested document, a None rubric, an empty item name)
    under two samples and True/1, 0/False kept apart."""
    context = {
        "question": "抽水蓄能电站项目核准（新建）收费吗？",
        "document": "事项名称：抽水蓄能电站项目核准（新建）\n收费标准：不收费\n" * 3,
        "answer": '不收费。\u200b"引号" \\ \t',
        "item_name": "",
        "lang": "zh",
        "dimension": "relevance",
        "rubric": None,
    }
    model = _model()
    ids = set()
    for sample in (0, 1, True, False):
        request = Request(messages=(), context=context, template_version="v", sample=sample)
        assert model._call_id(request) == _reference_id(model, request)
        ids.add(model._call_id(request))
    assert len(ids) == 4


class _Echo(OfflineModel):
    def respond(self, request: Request) -> Response:
        return Response(text=str(len(request.context)))


def test_a_batch_s_responses_carry_the_definition_s_ids() -> None:
    """`complete` (the batch, its head made once) gives each response the id of its request,
    flat contexts and others alike, repeats included."""
    model = _Echo(ModelSpec(provider="offline", model="echo", options={"k": [1, "二"]}))
    contexts = [
        {"question": "收费吗？", "document": "收费标准：不收费。" * 10, "rubric": None},
        {"question": "收费吗？", "document": "收费标准：不收费。" * 10, "rubric": None},
        {"documents": ["长" * 70, "短"], "lang": "zh"},
        {"n": 1, "x": 0.5},
        {},
    ]
    requests = [Request((), c, "v", s) for c in contexts for s in (0, 1)]
    responses = model.complete(requests, role="judging", progress=False)
    assert [r.call_id for r in responses] == [_reference_id(model, q) for q in requests]


def test_releasing_an_offline_model_s_caches_forgets_the_texts_not_the_ids() -> None:
    """`release_caches` empties the digests of long texts (their keys hold the texts); the ids
    made after it are the definition's, as before it."""
    from cube.llm import models

    model = _Echo(ModelSpec(provider="offline", model="echo"))
    request = Request((), {"document": "办理地点：政务服务中心" * 10, "answer": "不收费"}, "v", 0)
    first = model._call_id(request)
    assert models._text_digest.cache_info().currsize > 0
    model.release_caches()
    assert models._text_digest.cache_info().currsize == 0
    assert model._call_id(request) == first == _reference_id(model, request)

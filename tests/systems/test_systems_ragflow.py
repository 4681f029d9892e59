"""The RAGFlow adapter against a local RAGFlow API stand-in, with ragflow-sdk as the client."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from cube.config.sections import RagflowSystem
from cube.llm import usage_summary
from cube.systems.ragflow import RagflowAssistant, RagflowError
from tests.ragflow_server import GENERATIONS, RagflowTestServer, ReplyError

KEY = "ragflow-test-key-123456"
CHATS = [
    {
        "id": "chat0001",
        "name": "政务助手",
        "llm": {"model_name": "qwen2.5-32b"},
        "dataset_ids": ["ds0"],
    }
]


def _corpus() -> pd.DataFrame:
    ids = ["D001", "D002", "D003"]
    return pd.DataFrame({"doc_id": ids, "text": [f"事项名称：事项{i}" for i in ids]})


def _questions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3", "q4"],
            "doc_id": ["D001", "D002", "D003", "D001"],
            "question": [
                "事项D001要什么材料？",
                "事项D002多久办结？",
                "事项D003收费吗？",
                "无关的问题",
            ],
        }
    )


def _chunk(doc: str, name: str | None = None) -> dict[str, str]:
    return {
        "document_id": f"rf-{doc}",
        "document_name": name or f"{doc}.txt",
        "content": f"chunk of {doc}",
    }


def _responder(question: str) -> dict:
    if "D001" in question:  # gold first, twice (two chunks of one document), then another document
        return {
            "answer": "需要身份证。",
            "chunks": [_chunk("D001"), _chunk("D001"), _chunk("D002")],
        }
    if "D002" in question:  # a document that is not in the corpus outranks the gold one
        return {"answer": "20个工作日。", "chunks": [_chunk("X999"), _chunk("D002")]}
    if "D003" in question:
        raise ReplyError(100, "LLM service unavailable")
    return {"answer": "知识库中未找到您要的答案！", "chunks": []}


def _spec(server: RagflowTestServer, **kw) -> RagflowSystem:
    args = {
        "name": "rf",
        "base_url": server.base_url,
        "assistant": "政务助手",
        "api_key_env": "CUBE_TEST_RAGFLOW_KEY",
    }
    return RagflowSystem(**{**args, **kw})


@pytest.fixture(params=GENERATIONS, ids=[f"ragflow-{g}" for g in GENERATIONS])
def server(request, monkeypatch):
    """The RAGFlow API of both generations (list_chats' reply shape differs), whichever SDK is
    installed."""
    monkeypatch.setenv("CUBE_TEST_RAGFLOW_KEY", KEY)
    with RagflowTestServer(KEY, CHATS, _responder, generation=request.param) as srv:
        yield srv


def test_the_installed_sdk_is_the_one_this_python_allows():
    """ragflow-sdk 0.22 on Python 3.11, 0.26 on 3.12, 0.27 on 3.13 (pyproject's environment
    markers)."""
    import sys
    from importlib.metadata import version

    major_minor = tuple(int(x) for x in version("ragflow-sdk").split(".")[:2])
    expected = {(3, 11): (0, 22), (3, 12): (0, 26), (3, 13): (0, 27)}[sys.version_info[:2]]
    assert major_minor == expected


def test_the_sdk_generation_reads_its_own_server_generation(server):
    """The installed SDK's own list_chats reads its generation's reply; the adapter reads both."""
    from importlib.metadata import version

    from ragflow_sdk import RAGFlow

    new_sdk = tuple(int(x) for x in version("ragflow-sdk").split(".")[:2]) >= (0, 23)
    rag = RAGFlow(api_key=KEY, base_url=server.base_url)
    if new_sdk == (server.generation != "0.22"):
        assert [c.id for c in rag.list_chats(name="政务助手")] == ["chat0001"]
    else:  # the SDK alone cannot read the other generation's reply, hence the adapter's own request
        with pytest.raises(
            (AttributeError, TypeError)
        ):  # a dict's keys read as chats / a list indexed by "chats"
            rag.list_chats(name="政务助手")
    chat, record = RagflowAssistant(_spec(server))._chat(rag)
    assert chat.id == "chat0001" and record["name"] == "政务助手"


def test_answers_ranks_unmapped_and_failures(server):
    with pytest.warns(UserWarning, match="1 retrieved document"):
        df = RagflowAssistant(_spec(server)).answer(_questions(), _corpus(), progress=False)
    by = df.set_index("question_id")
    assert list(df["question_id"]) == ["q1", "q2", "q3", "q4"] and set(df["set"]) == {"rag"}
    # q1: the two chunks of D001 keep its first rank; D002 follows.
    assert by.loc["q1", "retrieved_doc_ids"] == ["D001", "D002"] and by.loc["q1", "rank"] == 1
    assert by.loc["q1", "answer"] == "需要身份证。" and by.loc["q1", "error"] == ""
    # q2: the unknown document keeps its place as an unmapped entry, so the gold is rank 2.
    assert (
        by.loc["q2", "retrieved_doc_ids"] == ["unmapped:X999.txt", "D002"]
        and by.loc["q2", "rank"] == 2
    )
    assert df.attrs["unmapped"] == 1
    # q3: the error reply is recorded, not dropped, and no answer is invented.
    assert by.loc["q3", "error"] == "RAGFlow code 100: LLM service unavailable"
    assert pd.isna(by.loc["q3", "answer"]) and by.loc["q3", "n_retrieved"] == 0
    # q4: nothing retrieved.
    assert by.loc["q4", "rank"] == 0 and by.loc["q4", "n_retrieved"] == 0
    assert set(df["answerer"]) == {"qwen2.5-32b"} and set(df["role"]) == {"answering"}
    # A failed call says nothing about retrieval; a reply without chunks is a known empty retrieval.
    assert by["retrieval_ok"].to_dict() == {"q1": True, "q2": True, "q3": False, "q4": True}
    assert df["retrieval_ok"].dtype == bool and set(df["finish_reason"]) == {""}
    # Each question is one real call: its own id, unknown cost, accounted to RAGFlow itself.
    assert df["call_id"].str.fullmatch(r"[0-9a-f]{32}").all() and df["call_id"].nunique() == 4
    assert df["cost"].isna().all() and set(df["model"]) == {"ragflow:政务助手"}
    assert (df["input_tokens"] == 0).all() and not df["cached"].any()
    # One fresh session per question, asked non-streaming.
    assert len(server.sessions) == 4
    asks = [body for method, path, body in server.log if path.endswith("/completions")]
    assert len(asks) == 4 and all(
        b["stream"] is False and b["session_id"] in server.sessions for b in asks
    )
    # The key never reaches the table.
    assert KEY not in df.astype(str).to_csv()


def test_assistant_by_id_and_document_id_mapping(server):
    def by_doc_id(question: str) -> dict:
        return {
            "answer": "ok",
            "chunks": [
                {"document_id": "D003", "document_name": "whatever.txt"},
                {"document_id": "D001", "document_name": "x.txt"},
                {"document_id": "D002", "document_name": "y.txt"},
            ],
        }

    server.responder = by_doc_id
    spec = _spec(server, assistant="chat0001", doc_mapping="document_id", top_n=2)
    df = RagflowAssistant(spec).answer(_questions().head(2), _corpus(), progress=False)
    assert df["retrieved_doc_ids"].tolist() == [
        ["D003", "D001"],
        ["D003", "D001"],
    ]  # cut at top_n = 2
    assert df["rank"].tolist() == [2, 0]
    assert df.attrs["unmapped"] == 0


def test_missing_key_names_the_variable(server, monkeypatch):
    monkeypatch.delenv("CUBE_TEST_RAGFLOW_KEY")
    with pytest.raises(RagflowError, match="CUBE_TEST_RAGFLOW_KEY"):
        RagflowAssistant(_spec(server)).answer(_questions(), _corpus(), progress=False)


def test_wrong_key_and_unknown_assistant_are_clear_errors(server, monkeypatch):
    monkeypatch.setenv("CUBE_TEST_RAGFLOW_KEY", "wrong-key-987")
    with pytest.raises(RagflowError, match="API key is invalid") as err:
        RagflowAssistant(_spec(server)).answer(_questions(), _corpus(), progress=False)
    assert "wrong-key-987" not in str(err.value)
    monkeypatch.setenv("CUBE_TEST_RAGFLOW_KEY", KEY)
    with pytest.raises(RagflowError, match="no chat assistant 'nobody'"):
        RagflowAssistant(_spec(server, assistant="nobody")).answer(
            _questions(), _corpus(), progress=False
        )


def test_usage_of_ragflow_answers_and_a_priced_model_of_the_same_name(server):
    """RAGFlow's unknown price stays with RAGFlow: the bound-set model named like its LLM keeps its
    cost."""
    with pytest.warns(UserWarning):
        df = RagflowAssistant(_spec(server)).answer(_questions(), _corpus(), progress=False)
    bound = df.assign(
        call_id=[f"k{i}" for i in range(4)], model="qwen2.5-32b", cost=0.01, error="", set="zero"
    )
    usage = usage_summary([pd.concat([df, bound], ignore_index=True)]).set_index("model")
    assert usage.loc["ragflow:政务助手", ["calls", "failed_calls", "skipped"]].tolist() == [4, 1, 0]
    assert math.isnan(usage.loc["ragflow:政务助手", "cost_total"])
    assert usage.loc["qwen2.5-32b", "cost_total"] == pytest.approx(0.04)


def test_top_n_below_one_is_rejected():
    spec = RagflowSystem(name="rf", base_url="http://127.0.0.1:1", assistant="a", top_n=1)
    assert RagflowAssistant(spec).map_chunks(
        [_chunk("D001"), _chunk("D002")], {"D001", "D002"}
    ) == ["D001"]
    with pytest.raises(RagflowError, match=r"top_n: must be >= 1, got 0"):
        RagflowAssistant(spec.model_copy(update={"top_n": 0}))


def test_pattern_without_doc_id_group_is_rejected():
    spec = RagflowSystem(
        name="rf", base_url="http://127.0.0.1:1", assistant="a", doc_name_pattern=r"^([^.]+)"
    )
    with pytest.raises(RagflowError, match="doc_name_pattern"):
        RagflowAssistant(spec)

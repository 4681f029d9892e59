"""The concurrency limit learned per endpoint and model (issue 41): stored beside the call cache at
the end of a batch, read by the next run's first batch as its start, still cut by 429s and still
stepped back on a server that now queues; a corrupt or stale store is a warning, never a crash."""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from pathlib import Path

from cube.config.model_spec import ModelSpec
from cube.llm import Request, make_model
from cube.llm.concurrency import AdaptiveLimit, Learned
from cube.llm.learned_limit import FILE_NAME, LimitStore, store_key
from tests.llm.test_concurrency import _virtual
from tests.openai_server import OpenAIServer


def _requests(n: int, tag: str) -> list[Request]:
    return [Request(({"role": "user", "content": f"{tag}{i}"},)) for i in range(n)]


def _stored(folder: Path) -> dict:
    return json.loads((folder / FILE_NAME).read_text(encoding="utf-8"))["limits"]


def test_a_run_stores_its_limit_and_the_next_run_starts_there_without_a_secret(
    tmp_path, monkeypatch
):
    """A batch that grew to max_concurrency without pushback stores it beside the cache, keyed by
    model and base URL, with neither the API key nor a secret header; a new model object on the
    same cache folder (the next stage's kernel) starts at half of it, not at 4."""
    monkeypatch.setenv("LL_KEY", "sk-learned-secret-1234")
    monkeypatch.setenv("LL_HDR", "hdr-learned-secret-5678")
    cache = tmp_path / "cache.sqlite"
    # 0.2 s per call: the rate doubles with the calls in flight far above a loaded client's noise
    with OpenAIServer(reply=lambda body: "ok", latency_s=0.2) as server:
        spec = ModelSpec(
            model="m",
            base_url=server.url,
            max_concurrency=16,
            api_key_env="LL_KEY",
            header_env={"X-Secret": "LL_HDR"},
        )
        first = make_model(spec, cache_path=cache)
        assert all(r.ok for r in first.complete(_requests(80, "a"), role="judging", progress=False))
        assert first.concurrency["start"] == 4 and not first.concurrency["learned_start"]
        text = (tmp_path / FILE_NAME).read_text(encoding="utf-8")
        assert "learned-secret" not in text and "LL_KEY" not in text and "X-Secret" not in text
        record = _stored(tmp_path)[store_key("m", [server.url])]
        assert record["endpoints"] == [server.url] and record["model"] == "m"
        assert (record["settled_limit"], record["peak"], record["congested"], record["flat"]) == (
            16,
            16,
            False,
            False,
        )
        later = make_model(spec, cache_path=cache)
        out = later.complete(_requests(40, "b"), role="judging", progress=False)
    assert all(r.ok for r in out)
    assert later.concurrency["start"] == 8 and later.concurrency["learned_start"]


def test_a_learned_limit_backs_off_on_429s_and_stores_the_lower_limit(tmp_path):
    """The store says 32 in flight worked; the endpoint now answers 429 beyond 6 in flight: the
    limit is cut from its learned start, every call is answered, and the store then holds a
    congested limit below 32 (the store is a start, not a cap)."""
    cache = tmp_path / "cache.sqlite"
    with OpenAIServer(reply=lambda body: "ok", latency_s=0.05) as server:
        LimitStore.beside(cache).write("m", [server.url], Learned(32, 32, False, False))
        server.fail("429", times=None, when=lambda body: server.in_flight > 6)
        spec = ModelSpec(
            model="m", base_url=server.url, max_concurrency=32, max_attempts=30, backoff_max_s=0.3
        )
        model = make_model(spec, cache_path=cache)
        out = model.complete(_requests(120, "q"), role="judging", progress=False)
    assert all(r.ok for r in out)
    c = model.concurrency
    assert c["start"] == 16 and c["learned_start"]
    assert c["cuts"] >= 1 and c["http_429"] >= 1 and c["lowest_limit"] < 16, c
    record = _stored(tmp_path)[store_key("m", [server.url])]
    assert record["congested"] and record["settled_limit"] < 32 and not record["flat"]


def test_a_learned_limit_still_finds_a_server_that_now_queues():
    """Learned at 64 on a server that ran calls in parallel; it now serves one at a time: the
    first two windows (32, then 64) compare levels, the rate stays flat, and the limit steps back
    to the floor, where the batch learns a flat limit for the next run."""
    lim, _, _ = _virtual([1.0] * 400, slots=1, learned=Learned(64, 64, False, False))
    assert lim.start == 32 and lim.flat_steps >= 1 and lim.limit <= 2, lim.summary()
    learned = lim.learned()
    assert learned is not None and learned.flat and learned.limit <= 2
    # ... and a parallel server started from its learned limit keeps it
    par, _, _ = _virtual([1.0] * 600, slots=None, learned=Learned(64, 64, False, False))
    assert par.limit == 64 and par.flat_steps == 0, par.summary()
    assert par.learned() == Learned(64, 64, False, False)


def test_a_flat_limit_starts_settled_and_a_batch_without_evidence_learns_nothing():
    lim = AdaptiveLimit(1, 64, learned=Learned(2, 2, False, True))
    assert lim.limit == 2 and lim.mode == "hold" and lim.settled_limit() == 2
    # an in-process settled limit (this model's earlier batch) outranks the store
    assert AdaptiveLimit(1, 64, settled=5, learned=Learned(40, 40, False, False)).limit == 5
    assert AdaptiveLimit(1, 64).learned() is None  # no window closed, no pushback
    cut = AdaptiveLimit(1, 64)
    cut.congested()
    assert cut.learned() == Learned(2, 0, True, False)  # int(4 * 0.7)


def test_a_shorter_grown_batch_does_not_lower_the_stored_limit_but_pushback_does(tmp_path):
    store = LimitStore(tmp_path / FILE_NAME)
    store.write("m", ["http://h/v1"], Learned(64, 64, False, False))
    store.write("m", ["http://h/v1"], Learned(10, 10, False, False))  # a 10-call batch
    assert store.read("m", ["http://h/v1"]).limit == 64
    store.write("m", ["http://h/v1"], Learned(20, 40, True, False))
    assert store.read("m", ["http://h/v1"]) == Learned(20, 40, True, False)
    store.write("m", ["http://h/v1"], None)  # no evidence: unchanged
    assert store.read("m", ["http://h/v1"]) == Learned(20, 40, True, False)
    # keyed by model and base URLs: another model, or replicas, are other records
    assert store.read("other", ["http://h/v1"]) is None
    assert store.read("m", ["http://h/v1", "http://h2/v1"]) is None


def test_a_kept_limit_keeps_its_date_and_still_ages_out(tmp_path):
    """A shorter grown batch keeps the stored limit, not a fresh date for it: the limit that no
    batch has reached since still ages out after MAX_AGE_DAYS (review of issue 41)."""
    store = LimitStore(tmp_path / "concurrency_limits.json")
    store.write("m", ["http://h/v1"], Learned(64, 64, False, False))
    data = json.loads(store.path.read_text(encoding="utf-8"))
    (record,) = data["limits"].values()
    record["updated"] = (dt.datetime.now(dt.UTC) - dt.timedelta(days=29)).isoformat()
    store.path.write_text(json.dumps(data), encoding="utf-8")
    store.write("m", ["http://h/v1"], Learned(8, 8, False, False))  # grew to 8 only
    assert store.read("m", ["http://h/v1"]) == Learned(64, 64, False, False)  # kept, not lowered
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)
    assert store.read("m", ["http://h/v1"], now=later) is None  # 31 days: aged out
    store.write("m", ["http://h/v1"], Learned(80, 80, False, False))  # new evidence: a new date
    assert store.read("m", ["http://h/v1"], now=later) == Learned(80, 80, False, False)


def test_the_key_and_record_hold_no_user_info_or_query_of_the_url(tmp_path):
    store = LimitStore(tmp_path / FILE_NAME)
    url = "https://user:pa55word@api.example.com/v1?api-key=sk-query-secret"
    store.write("m", [url], Learned(8, 8, False, False))
    text = (tmp_path / FILE_NAME).read_text(encoding="utf-8")
    assert "pa55word" not in text and "sk-query-secret" not in text and "user" not in text
    assert store.read("m", [url]) == Learned(8, 8, False, False)
    assert _stored(tmp_path)[store_key("m", [url])]["endpoints"] == ["https://api.example.com/v1"]


def test_a_corrupt_or_stale_store_is_ignored_with_a_warning_and_replaced(tmp_path, caplog):
    path = tmp_path / FILE_NAME
    store = LimitStore(path)
    caplog.set_level(logging.WARNING, logger="cube.llm")
    path.write_text("{not json", encoding="utf-8")
    assert store.read("m", ["http://corrupt/v1"]) is None
    assert "unreadable" in caplog.text and str(path) in caplog.text
    store.write("m", ["http://corrupt/v1"], Learned(8, 8, False, False))  # replaced
    assert store.read("m", ["http://corrupt/v1"]) == Learned(8, 8, False, False)
    # a record of another shape, and one too old
    data = json.loads(path.read_text(encoding="utf-8"))
    data["limits"][store_key("m", ["http://shape/v1"])] = {"settled_limit": "many"}
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=90)).isoformat()
    record = {"settled_limit": 8, "peak": 8, "congested": False, "flat": False, "updated": old}
    data["limits"][store_key("m", ["http://stale/v1"])] = record
    path.write_text(json.dumps(data), encoding="utf-8")
    assert store.read("m", ["http://shape/v1"]) is None
    assert "settled_limit: expected an integer" in caplog.text
    assert store.read("m", ["http://stale/v1"]) is None and "90 days old" in caplog.text
    assert store.read("m", ["http://corrupt/v1"]) == Learned(8, 8, False, False)
    path.write_text('{"version": 99, "limits": {}}', encoding="utf-8")  # another format
    assert store.read("m", ["http://corrupt/v1"]) is None and "version 1" in caplog.text


def test_a_corrupt_store_does_not_stop_a_run(tmp_path, caplog):
    (tmp_path / FILE_NAME).write_text("[1, 2", encoding="utf-8")
    caplog.set_level(logging.WARNING, logger="cube.llm")
    with OpenAIServer(reply=lambda body: "ok", latency_s=0.01) as server:
        model = make_model(
            ModelSpec(model="m", base_url=server.url, max_concurrency=4),
            cache_path=tmp_path / "cache.sqlite",
        )
        out = model.complete(_requests(30, "c"), role="judging", progress=False)
    assert all(r.ok for r in out) and model.concurrency["start"] == 4
    assert store_key("m", [server.url]) in _stored(tmp_path)  # rewritten whole


def test_concurrent_writers_keep_every_record(tmp_path):
    """Runs sharing a cache folder write at once: the file stays valid JSON with every record
    (read-change-write under the folder's lock, atomic replace)."""
    path = tmp_path / FILE_NAME

    def writer(i: int) -> None:
        store = LimitStore(path)
        for j in range(10):
            store.write(f"m{i}", [f"http://h{j}/v1"], Learned(4 + i, 4 + i, False, False))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    limits = _stored(tmp_path)
    assert len(limits) == 80 and not list(tmp_path.glob("*.tmp"))
    assert all(
        LimitStore(path).read(f"m{i}", [f"http://h{j}/v1"]).limit == 4 + i
        for i in range(8)
        for j in range(10)
    )

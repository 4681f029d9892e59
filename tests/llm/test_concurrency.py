"""Adaptive concurrency (AIMD): the limit is cut to 70 % on 429/timeouts (once for the calls in
flight) and grows back."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from cube.config.model_spec import ModelSpec
from cube.llm import Request, concurrency, make_model
from cube.llm.concurrency import AdaptiveLimit
from tests import ROOT
from tests.openai_server import OpenAIServer


def docs_text() -> str:
    """Every page of the documentation site (docs/**/*.md), where the README's wording moved."""
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").rglob("*.md")))


def test_slow_start_then_cut_once_per_window_and_additive_growth_within_bounds():
    lim = AdaptiveLimit(2, 16)
    assert lim.limit == 4  # slow start
    for _ in range(1 + concurrency.WINDOW):  # the first answer opens a window, WINDOW more close it
        lim.success()
    assert (
        lim.limit == 8
    )  # doubles per window before the first cut (nothing measured in flight here)
    for _ in range(100):
        lim.success()
    assert lim.limit == 16  # never above max_concurrency
    lim.congested()
    assert lim.limit == pytest.approx(16 * 0.7) and lim.cuts == 1
    lim.congested()  # the same window's other 429s: no second cut
    assert lim.cuts == 1
    before = lim.limit
    lim.success()
    assert lim.limit == pytest.approx(before + 1 / before)  # additive increase after a cut
    for _ in range(20):
        lim._seq += 1  # a call started after the last cut is refused too
        lim.congested()
    assert lim.limit == 2 and lim.lowest == 2  # never below min_concurrency
    assert AdaptiveLimit(8, 8).limit == 8 and AdaptiveLimit(1, 2).limit == 2
    with pytest.raises(ValueError, match="min_concurrency"):
        AdaptiveLimit(5, 4)


def test_429s_from_calls_in_flight_at_the_cut_cut_once_and_later_calls_cut_again():
    async def main() -> AdaptiveLimit:
        lim = AdaptiveLimit(1, 16)
        lim.limit = 16.0
        tickets = [await lim.acquire() for _ in range(16)]  # one window, all in flight
        for t in tickets:  # each returns a 429 in turn, interleaved with releases
            lim.congested(t)
            await lim.release()
        assert lim.cuts == 1 and lim.limit == pytest.approx(16 * 0.7)
        late = await lim.acquire()  # started after the cut: its 429 says the endpoint is still busy
        lim.congested(tickets[0])  # a straggler from before the cut still changes nothing
        assert lim.cuts == 1
        lim.congested(late)
        await lim.release()
        assert lim.cuts == 2 and lim.limit == pytest.approx(16 * 0.7 * 0.7)
        return lim

    assert asyncio.run(main()).in_flight == 0


def test_at_most_limit_calls_in_flight_and_waiters_wake_up():
    async def main() -> AdaptiveLimit:
        lim = AdaptiveLimit(1, 4)
        lim.limit = 3.0
        now = 0
        most = 0

        async def one() -> None:
            nonlocal now, most
            async with lim:
                now += 1
                most = max(most, now)
                await asyncio.sleep(0.001)
                now -= 1

        await asyncio.gather(*(one() for _ in range(50)))
        assert most == 3
        return lim

    lim = asyncio.run(main())
    assert lim.peak == 3 and lim.in_flight == 0


def test_a_rate_limited_endpoint_cuts_the_limit_and_every_call_succeeds():
    with OpenAIServer(reply=lambda body: "Score: 7", latency_s=0.02, rate_limit_rps=100) as server:
        spec = ModelSpec(
            model="m",
            base_url=server.url,
            max_concurrency=32,
            min_concurrency=2,
            max_attempts=20,
            backoff_max_s=2,
        )
        model = make_model(spec)
        requests = [Request(({"role": "user", "content": f"q{i}"},)) for i in range(150)]
        out = model.complete(requests, role="judging", progress=False)
    assert all(r.ok for r in out)
    c = model.concurrency
    assert c["cuts"] >= 1 and c["lowest_limit"] < 32 and c["min"] == 2 and c["max"] == 32
    assert server.rate_limited >= 1 and server.requests_total == 150 + server.rate_limited


def test_without_pushback_the_limit_stays_at_max_concurrency():
    # 0.2 s per call: a parallel server's throughput doubles with the calls in flight by far more
    # than a CPU-starved client's own overhead, so the flat-throughput detector has nothing to
    # mistake (at 0.05 s it took a false flat step once on a loaded machine)
    with OpenAIServer(reply=lambda body: "ok", latency_s=0.2) as server:
        model = make_model(ModelSpec(model="m", base_url=server.url, max_concurrency=8))
        out = model.complete(
            [Request(({"role": "user", "content": f"q{i}"},)) for i in range(40)],
            role="judging",
            progress=False,
        )
    assert all(r.ok for r in out)
    assert model.concurrency["cuts"] == 0 and model.concurrency["final_limit"] == 8
    assert server.max_in_flight == model.concurrency["peak_in_flight"] == 8


def test_the_documented_start_and_cut_are_the_ones_the_code_uses():
    from cube.llm import concurrency

    fields = ModelSpec.model_fields
    text = fields["max_concurrency"].description + " " + fields["min_concurrency"].description
    docs = " ".join(docs_text().split())
    for doc in (text, docs):
        assert f"starts at {concurrency.SLOW_START}" in doc
        assert f"cut to {round(concurrency.DECREASE * 100)} %" in doc
    assert "halv" not in text and "starts here" not in text
    assert AdaptiveLimit(1, 16).limit == concurrency.SLOW_START


@pytest.mark.parametrize(
    ("urls", "expected"),
    [
        (["http://127.0.0.1:8000/v1"], 64),
        (["http://localhost:11434/v1"], 64),
        (["http://[::1]:8000/v1"], 64),
        (["http://10.1.2.3/v1", "http://192.168.0.7:8000/v1"], 64),
        (["http://[fd00::1]:8000/v1"], 64),
        (["http://0.0.0.0:8000/v1"], 64),
        (["http://100.64.1.2:8000/v1"], 64),  # CGNAT / Tailscale (100.64.0.0/10)
        (["http://host.docker.internal:11434/v1"], 64),
        (["http://vllm.default.svc.cluster.local:8000/v1"], 64),
        (["http://gpu-box.local:8000/v1"], 64),
        (["http://app.localhost:8000/v1"], 64),
        # a one-word name may be a corporate gateway reached through the DNS search domain: hosted,
        # not local
        (["https://llm-gateway/v1"], 16),
        (["http://vllm:8000/v1"], 16),
        (["https://api.openai.com/v1"], 16),
        (["https://8.8.8.8/v1"], 16),
        (["http://100.128.0.1/v1"], 16),
        (["http://local.example.com/v1"], 16),
        (["http://internal.example.com/v1"], 16),
        (
            ["http://127.0.0.1:8000/v1", "https://api.deepseek.com/v1"],
            16,
        ),  # one remote replica: the remote default
        # review4: ipaddress's is_private also counts benchmark, reserved and documentation ranges
        (["http://198.18.0.1/v1"], 16),
        (["http://240.1.2.3/v1"], 16),
        (["http://[2001:db8::1]/v1"], 16),
        (["http://169.254.3.4/v1"], 64),
        (["http://172.20.0.3:8000/v1"], 64),
    ],
)
def test_default_max_concurrency_is_64_for_local_endpoints_and_16_elsewhere(urls, expected):
    spec = ModelSpec(
        model="m", **({"base_url": urls[0]} if len(urls) == 1 else {"base_urls": urls})
    )
    assert spec.max_concurrency == expected
    assert AdaptiveLimit(spec.min_concurrency, spec.max_concurrency).hi == expected


def test_an_explicit_max_concurrency_always_wins_and_the_default_is_documented():
    from cube.config.model_spec import LOCAL_MAX_CONCURRENCY, REMOTE_MAX_CONCURRENCY

    assert (
        ModelSpec(model="m", base_url="http://127.0.0.1/v1", max_concurrency=8).max_concurrency == 8
    )
    assert (
        ModelSpec(
            model="m", base_url="https://api.openai.com/v1", max_concurrency=200
        ).max_concurrency
        == 200
    )
    doc = ModelSpec.model_fields["max_concurrency"].description
    docs = " ".join(docs_text().split())
    for text in (doc, docs):
        assert (
            f"{LOCAL_MAX_CONCURRENCY} when every base URL is local" in text
            and f"else {REMOTE_MAX_CONCURRENCY}" in text
        )
    # through params too: a model under `models:` and an inline judge model
    from cube.config.params import parse_params

    params = parse_params(
        {
            "run": "c",
            "models": {"near": {"model": "q", "base_url": "http://127.0.0.1:8000/v1"}},
            "judges": [
                {"name": "a", "model": "near"},
                {"name": "b", "model": {"model": "g", "base_url": "https://api.openai.com/v1"}},
            ],
        }
    )
    assert [params.model(j.model).max_concurrency for j in params.judges] == [64, 16]


def test_the_concurrency_reached_is_in_the_run_manifest(tmp_path, monkeypatch):
    """It was only in results.json; the manifest (what produced the report) now has it per judge."""
    import datetime as dt
    import json

    from cube.run import pipeline
    from cube.run.execute import RunSummary, write_manifest
    from cube.run.notebook import open_run
    from tests.openai_server import score_reply

    monkeypatch.chdir(tmp_path)
    with OpenAIServer(reply=score_reply, latency_s=0.02, rate_limit_rps=60) as server:
        params = tmp_path / "p.yaml"
        params.write_text(
            f"""run: m
outputs_dir: {tmp_path / "out"}
corpus: {{source: demo, n_items: 12, seed: 1}}
questions: {{generator: template, seed: 1}}
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
dimensions: [relevance, completeness]
judges:
  - {{name: llm, model: {{provider: openai, model: test-model, base_url: "{server.url}", \
max_tokens: 16,
                         max_attempts: 20, backoff_max_s: 2}}}}
  - {{name: rubric, model: {{provider: offline, model: rubric-strict}}}}
""",
            encoding="utf-8",
        )
        run = open_run(params)
        for stage in (
            pipeline.corpus_stage,
            pipeline.questions_stage,
            pipeline.answers_stage,
            pipeline.scores_stage,
        ):
            stage(run)
        write_manifest(run.params, run.paths, RunSummary(run.paths), dt.datetime.now(dt.UTC))
    manifest = json.loads(run.paths.manifest.read_text(encoding="utf-8"))
    c = manifest["concurrency"]
    assert set(c) == {"llm"}  # the offline judge has no endpoint
    llm = c["llm"]
    assert llm["model"] == "test-model" and llm["endpoints"] == [server.url]
    assert (
        llm["start"] == 4 and llm["max"] == 64 and llm["min"] == 1
    )  # a local endpoint: the default max is 64
    assert llm["http_429"] == server.rate_limited >= 1 and llm["timeouts"] == 0
    assert llm["cuts"] >= 1 and llm["lowest_limit"] <= llm["final_limit"] <= 64
    assert 1 <= llm["peak_in_flight"] <= 64


def test_pushback_is_counted_by_kind_and_batches_of_one_model_add_up():
    from cube.llm.concurrency import merge_summaries

    lim = AdaptiveLimit(1, 32)
    lim.congested(None, "http_429")
    lim.congested(None, "http_429")  # same window: counted, not cut again
    lim.congested(None, "timeouts")
    s = lim.summary()
    assert (s["http_429"], s["timeouts"], s["cuts"], s["start"]) == (2, 1, 1, 4)
    later = AdaptiveLimit(1, 32)
    later.peak = 9
    later.congested(None, "timeouts")
    m = merge_summaries(s, later.summary())
    assert (m["http_429"], m["timeouts"], m["cuts"], m["peak_in_flight"], m["start"]) == (
        2,
        2,
        2,
        9,
        4,
    )
    assert m["final_limit"] == later.summary()["final_limit"] and merge_summaries({}, s) == s


def test_256_calls_are_all_in_flight_at_once():
    """One httpx pool of 256 connections scanned all of them for every request (CPU per call grew
    with the pool), so a client reached ~84 in flight at 256; pools of 16 reach every slot."""
    # 3 s per reply: on a loaded 2-core machine starting 256 requests took > 1 s (218 in flight)
    with OpenAIServer(reply=lambda body: "Score: 7", latency_s=3.0) as server:
        spec = ModelSpec(model="m", base_url=server.url, max_concurrency=256, min_concurrency=256)
        model = make_model(spec)
        out = model.complete(
            [Request(({"role": "user", "content": f"q{i}"},)) for i in range(256)],
            role="judging",
            progress=False,
        )
    assert all(r.ok for r in out) and server.requests_total == 256
    assert server.max_in_flight == model.concurrency["peak_in_flight"] == 256


def test_a_fully_cached_rerun_reports_no_calls_sent_not_the_previous_runs_concurrency(
    tmp_path, monkeypatch
):
    """results.json merges keys: a re-run of stage 03 whose calls all came from the cache kept the
    previous run's judge_concurrency, and the new manifest reported a peak in flight this run never
    reached."""
    import datetime as dt
    import json

    from cube.run import pipeline
    from cube.run.execute import RunSummary, write_manifest
    from cube.run.notebook import open_run
    from tests.openai_server import score_reply

    monkeypatch.chdir(tmp_path)
    with OpenAIServer(reply=score_reply) as server:
        params = tmp_path / "p.yaml"
        params.write_text(
            f"""run: m
outputs_dir: {tmp_path / "out"}
corpus: {{source: demo, n_items: 8, seed: 1}}
questions: {{generator: template, seed: 1}}
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
dimensions: [relevance]
judges:
  - {{name: llm, model: {{provider: openai, model: test-model, base_url: "{server.url}", \
max_tokens: 16}}}}
  - {{name: rubric, model: {{provider: offline, model: rubric-strict}}}}
""",
            encoding="utf-8",
        )
        run = open_run(params)
        for stage in (
            pipeline.corpus_stage,
            pipeline.questions_stage,
            pipeline.answers_stage,
            pipeline.scores_stage,
        ):
            stage(run)
        first = json.loads(run.paths.results.read_text(encoding="utf-8"))["judge_concurrency"][
            "llm"
        ]
        assert first["calls_sent"] == server.requests_total > 0 and first["peak_in_flight"] >= 1
        sent = server.requests_total
        rerun = open_run(params)
        pipeline.scores_stage(rerun)  # every call is in the cache now
        assert server.requests_total == sent
        write_manifest(rerun.params, rerun.paths, RunSummary(rerun.paths), dt.datetime.now(dt.UTC))
    c = json.loads(rerun.paths.manifest.read_text(encoding="utf-8"))["concurrency"]
    assert set(c) == {"llm"}
    assert c["llm"]["calls_sent"] == 0 and "peak_in_flight" not in c["llm"]
    assert c["llm"]["model"] == "test-model" and c["llm"]["endpoints"] == [server.url]
    assert "cache" in c["llm"]["note"]


async def _drive(lim: AdaptiveLimit, n: int, service_s: float, serial: bool) -> list[int]:
    """`n` calls through `lim` to a simulated server with a fixed service time that serves one call
    at a time (`serial`) or all at once; returns the calls in flight at each answer, in order."""
    server = asyncio.Lock()
    seen: list[int] = []

    async def serve() -> None:
        await asyncio.sleep(service_s)

    async def one() -> None:
        async with lim:
            if serial:
                async with server:
                    await serve()
            else:
                await serve()
            seen.append(lim.in_flight)
            lim.success()

    await asyncio.gather(*(one() for _ in range(n)))
    return seen


def test_a_one_at_a_time_server_settles_at_most_two_in_flight_and_a_parallel_one_gets_many():
    """Latency grows with the calls in flight on a serial server while the rate stays flat: the
    limit steps back to 1-2 within 60 answers (4 -> 8 flat -> 4 -> 2 -> 1, then probes of 2);
    a server that answers in parallel doubles it 4 -> 8 -> 16 -> ... (the rate doubles too)."""
    lim = AdaptiveLimit(1, 64)
    seen = asyncio.run(_drive(lim, 160, 0.01, serial=True))
    assert max(seen[60:]) <= 2 and lim.limit <= 2 and lim.flat_steps >= 1, (seen, lim.summary())
    assert lim.summary()["flat_steps"] == lim.flat_steps
    par = AdaptiveLimit(1, 64)
    seen = asyncio.run(_drive(par, 160, 0.02, serial=False))
    assert par.limit >= 8 and par.peak >= 8 and max(seen) >= 8, (seen, par.summary())


def test_the_http_path_finds_a_one_at_a_time_server_without_max_concurrency():
    """Through `cube.llm` and HTTP, default max_concurrency (64 for a local URL): every call is
    answered and the limit ends at 1-2 on a serial server (the model's next batch starts there: at
    most 2 requests at the server at once), at least 8 on a parallel one."""
    reqs = [Request(({"role": "user", "content": f"q{i}"},)) for i in range(120)]
    with OpenAIServer(reply=lambda body: "Score: 7", latency_s=0.01, serial=True) as server:
        model = make_model(ModelSpec(model="m", base_url=server.url))
        out = model.complete(reqs, role="judging", progress=False)
        c = model.concurrency
        assert (
            all(r.ok for r in out)
            and c["max"] == 64
            and c["final_limit"] <= 2
            and c["flat_steps"] >= 1
        ), c
        server.reset_stats()
        later = model.complete(
            [Request(({"role": "user", "content": f"p{i}"},)) for i in range(12)],
            role="judging",
            progress=False,
        )
        assert all(r.ok for r in later) and server.max_in_flight <= 2 and model.settled is not None
    with OpenAIServer(reply=lambda body: "Score: 7", latency_s=0.05) as server:
        model = make_model(ModelSpec(model="m", base_url=server.url))
        out = model.complete(reqs, role="judging", progress=False)
    c = model.concurrency
    assert all(r.ok for r in out) and c["final_limit"] >= 8 and server.max_in_flight >= 8, c


def _virtual(
    services: list[float],
    *,
    slots: int | None = None,
    hi: int = 64,
    settled: int | None = None,
    stop=None,
    learned=None,
) -> tuple[AdaptiveLimit, float, list[float]]:
    """Calls with the given service times (in send order) through an `AdaptiveLimit` on a virtual
    clock, to a server with `slots` calls in service at once (the rest queue FIFO) or unbounded
    (None). Stops early when `stop(lim)` holds after an answer. Returns the limit, the virtual time
    taken and the limit after each answer."""
    import heapq

    now = [0.0]
    lim = AdaptiveLimit(1, hi, clock=lambda: now[0], settled=settled, learned=learned)
    done: list[tuple[float, int]] = []  # (finish time, call)
    pending, queue, busy, limits = list(range(len(services)))[::-1], deque(), [0], []

    def dispatch() -> None:
        while queue and (slots is None or busy[0] < slots):
            i = queue.popleft()
            busy[0] += 1
            heapq.heappush(done, (now[0] + services[i], i))

    def send() -> None:
        while pending and lim.in_flight < int(lim.limit):
            lim._take()
            queue.append(pending.pop())
        dispatch()

    send()
    while done:
        now[0], _ = heapq.heappop(done)
        busy[0] -= 1
        dispatch()
        lim.success()
        lim._tick()
        lim.in_flight -= 1
        limits.append(lim.limit)
        if stop is not None and stop(lim):
            break
        send()
    return lim, now[0], limits


def _lognormal(n: int, seed: int, sigma: float = 1.0) -> list[float]:
    import math
    import random

    rng = random.Random(seed)
    return [rng.lognormvariate(math.log(3.0), sigma) for _ in range(n)]


def test_a_batch_that_ends_during_the_floor_test_hands_on_the_limit_before_the_drop():
    """review C2: a judge's 20-call pilot often ended in mode "down" (the one window at the floor
    unfinished) and its main batch started at 1 on a parallel endpoint (mean time 187 s -> 253
    s)."""
    lim, _, _ = _virtual([1.0] * 200, slots=1, stop=lambda lim: lim.mode == "down")
    assert lim.mode == "down" and lim.limit == 1
    assert lim.settled_limit() >= 8, (
        lim.summary()
    )  # the limit the rate was judged flat at, not the floor


def test_a_parallel_server_rarely_takes_a_false_flat_step():
    """review C2: one noisy window pair (log-normal service times, sigma 1) sent a parallel server
    to the floor in 29-51 % of batches; a step back now needs two flat judgements in a row."""
    runs = [_virtual(_lognormal(300, seed), slots=None)[0] for seed in range(60)]
    false_steps = sum(lim.flat_steps > 0 for lim in runs)
    assert false_steps <= 6, false_steps  # <= 10 %
    assert sum(lim.limit >= 32 for lim in runs) >= 54, [lim.limit for lim in runs]


def test_after_a_cut_the_limit_only_follows_429s_and_timeouts():
    """review C3: a rate-limited API's flat rate set off the flat detector and its 2x probes ran
    into the limiter (share of the rate limit 0.78 against 0.95). Once a 429 or timeout has cut the
    limit, it grows by 1/limit per answer and drops only on congestion: no flat step, no probe."""
    cut = {}

    def stop(lim: AdaptiveLimit) -> bool:
        if lim.limit >= 16 and not lim.cuts:
            lim.congested()  # a 429 at 16 in flight
            cut["at"] = len(seen)
        seen.append(lim.limit)
        return False

    seen: list[float] = []
    lim, _, _ = _virtual([0.5] * 600, slots=4, stop=stop)  # the rate is flat beyond 4 in flight
    after = seen[cut["at"] :]
    assert lim.cuts == 1 and lim.mode == "up", lim.summary()
    assert all(0 <= b - a <= 1 / a + 1e-9 for a, b in zip(after, after[1:], strict=False)), (
        after
    )  # additive only
    assert lim.settled_limit() is None


def test_the_documented_growth_after_a_cut_and_flat_step_are_the_ones_the_code_uses():
    """review: the docs and `min_concurrency` said the limit "grows back by one per window" after a
    429, while it grows by 1/limit per answered call, and only congestion moves it from then on."""
    text = ModelSpec.model_fields["min_concurrency"].description
    docs = " ".join(docs_text().split())
    for doc in (text, docs):
        assert "by one per window" not in doc
        assert "1/limit per answered call" in doc and "only 429s and timeouts" in doc
        assert "two windows in a row" in doc
    lim = AdaptiveLimit(1, 64)
    lim.limit = 10.0
    lim.congested()
    lim.success()
    assert lim.limit == pytest.approx(7 + 1 / 7)

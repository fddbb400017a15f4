"""The fidelity benchmark drives the model summarizer end to end against a loopback endpoint."""

from __future__ import annotations

import pytest
from benchmarks.fidelity import evaluate, fidelity_markdown
from benchmarks.fidelity_llm import KEY_ENV, MODEL_ENV, URL_ENV, llm_candidate
from benchmarks.probes import Probe, ProbeSet

from agentlog.compaction.fidelity_report import ClaudeCompaction
from agentlog.compaction.summarizer_openai import SUMMARY_INSTRUCTION
from agentlog.compaction.tokens import Pricer
from tests.compaction.fake_openai import FakeServer, stream_of
from tests.compaction.test_summarizers import conversation

pytest.importorskip("httpx")

ANSWER = ("## Primary Request and Intent\n- Fix the flaky export test; never touch migrations/\n"
          "## Critical Context\n- `pytest -q` → 12 passed, 1 failed\n")
"""What the scripted endpoint streams back (SSE chunks), as a model would."""


def probe(pid: str, category: str, *terms: str) -> Probe:
    return Probe(pid, category, "", tuple((t,) for t in terms))


def test_the_llm_candidate_is_scored_like_the_others_with_one_call_per_session(
        server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIDELITY_TEST_KEY", "sk-loopback")
    server.replies.append(stream_of(ANSWER))
    env = {URL_ENV: server.url, MODEL_ENV: "served-model", KEY_ENV: "FIDELITY_TEST_KEY"}
    candidate = llm_candidate(env)
    assert candidate is not None and candidate.name == "LLM summarizer (served-model)"
    summary = "a" * len(ANSWER)  # Claude's own summary: its size is the budget
    compaction = ClaudeCompaction("s1", tuple(conversation()), summary, "auto", None, None)
    probes = ProbeSet("s1", (probe("c1", "constraints", "never touch migrations"),
                             probe("r1", "results", "12 passed", "1 failed"),
                             probe("p1", "paths", "export.py")))
    rows = evaluate([compaction], [probes], Pricer().text, [candidate])
    (sent,) = server.received  # equal chars and the token fit cut one answer: one call
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-loopback"
    assert sent.body["model"] == "served-model"
    assert sent.body["messages"][-1]["content"] == SUMMARY_INSTRUCTION
    assert sent.body["max_tokens"] == 256  # Claude's size in tokens, at least 256
    by = {(r.candidate, r.size): r for r in rows}
    for size in ("chars", "tokens"):
        scored = by[("LLM summarizer (served-model)", size)]
        assert scored.score.hits == {"c1": True, "r1": True, "p1": False}
        assert scored.chars <= len(summary)
    assert "| LLM summarizer (served-model) (equal chars) |" in fidelity_markdown(rows)


def test_the_llm_candidate_is_off_without_an_endpoint_and_needs_a_model() -> None:
    assert llm_candidate({}) is None
    with pytest.raises(ValueError, match=f"{MODEL_ENV} is not"):
        llm_candidate({URL_ENV: "http://127.0.0.1:9/v1"})

"""The model summarizer made practical: an explicit API key, a timeout, a shorter summary instead of
an error at the output cap, and sync or async summarizers in the Compactor. Against a real local
HTTP server (127.0.0.1) streaming scripted SSE answers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import agentlog
from agentlog import Compactor, ExtractiveSummarizer, ModelPolicy, OpenAICompatibleSummarizer, PrunerConfig
from agentlog.compaction.summarizer_openai import SHORTER_INSTRUCTION, SUMMARY_INSTRUCTION
from agentlog.compaction.summary import SECTIONS, SummaryRequest, SummaryResult
from agentlog.errors import SummarizerError
from tests.compaction.fake_openai import FakeServer, stream_of
from tests.compaction.helpers import session_with_turns
from tests.compaction.test_summarizers import conversation

pytest.importorskip("httpx")


def request() -> SummaryRequest:
    return SummaryRequest(session_id="sess-1", messages=tuple(conversation()))


def test_the_instruction_asks_for_the_eight_sections_and_what_a_successor_needs() -> None:
    for name in SECTIONS:
        assert f"## {name}\n" in SUMMARY_INSTRUCTION
    for needed in ("every message the user wrote", "Commit ids", "test counts with the command",
                   "open or in-progress item of the task tracker", "what fixed it"):
        assert needed in SUMMARY_INSTRUCTION


def test_an_explicit_api_key_is_sent_and_never_shown(
        server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.replies.append(stream_of("## Primary Request and Intent\n- ok"))
    summarizer = OpenAICompatibleSummarizer(server.url, "m", api_key="sk-explicit-42", max_retries=0)
    asyncio.run(summarizer.summarize(request()))
    assert server.received[0].headers["authorization"] == "Bearer sk-explicit-42"
    assert "sk-explicit-42" not in repr(summarizer)


@pytest.mark.parametrize("bad", [{"api_key": ""}, {"api_key": "  "}, {"timeout": 0}, {"timeout": -1.0}])
def test_bad_options_are_refused_by_name(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        OpenAICompatibleSummarizer("http://127.0.0.1:9/v1", "m", **bad)


def test_a_summary_that_hits_the_cap_is_asked_for_again_shorter(server: FakeServer) -> None:
    server.replies += [stream_of("## Primary Request and Intent\n- a very long", finish="length"),
                       stream_of("## Primary Request and Intent\n- short")]
    summarizer = OpenAICompatibleSummarizer(server.url, "m", max_tokens=500, max_retries=0, timeout=5)
    answer = asyncio.run(summarizer.summarize(request()))
    assert answer.summary[0]["text"] == "## Primary Request and Intent\n- short"
    first, second = (r.body["messages"][-1]["content"] for r in server.received)
    assert first == SUMMARY_INSTRUCTION
    assert second == SUMMARY_INSTRUCTION + SHORTER_INSTRUCTION.format(words=200)
    assert all(r.body["max_tokens"] == 500 for r in server.received)


def test_shortening_can_be_turned_off(server: FakeServer) -> None:
    server.replies.append(stream_of("## Primary", finish="length"))
    summarizer = OpenAICompatibleSummarizer(server.url, "m", max_tokens=50, max_retries=0,
                                            shorten_on_cap=False)
    with pytest.raises(SummarizerError, match=r"truncated at max_tokens=50 \(incomplete") as caught:
        asyncio.run(summarizer.summarize(request()))
    assert caught.value.code == "MAX_TOKENS" and len(server.received) == 1


def test_the_timeout_bounds_a_stalled_stream(server: FakeServer) -> None:
    reply = stream_of("## Primary Request and Intent\n- slow")
    reply.delay = 2.0
    server.replies.append(reply)
    summarizer = OpenAICompatibleSummarizer(server.url, "m", timeout=0.3, max_retries=0)
    with pytest.raises(SummarizerError, match=r"timed out after 0\.3s") as caught:
        asyncio.run(summarizer.summarize(request()))
    assert caught.value.code == "TIMEOUT"


# -- sync and async summarizers in the Compactor ----------------------------------------------------


class PlainSummarizer:
    """A plain ``def summarize``: the Compactor runs it in a worker thread."""

    def __init__(self) -> None:
        self.thread: str | None = None
        self.text = ""

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.thread = threading.current_thread().name
        self.text = f"{len(request.messages)} messages."
        return SummaryResult(summary=({"type": "text", "text": self.text},), provider="test", model="plain")


class ReturnsAwaitable:
    """A plain ``def`` that returns a coroutine (e.g. a wrapper around an async client)."""

    def summarize(self, request: SummaryRequest) -> Any:
        return ExtractiveSummarizer(max_ratio=None).summarize(request)


def compact(summarizer: Any) -> Any:
    session, _recorder = session_with_turns(4)
    return session, Compactor(summarizer).compact_now(session)


def test_a_plain_def_summarizer_is_run_in_a_worker_thread() -> None:
    summarizer = PlainSummarizer()
    session, result = compact(summarizer)
    assert result is not None and summarizer.thread not in (None, threading.main_thread().name)
    summaries = [e.data["summary"][0]["text"] for e in session.events if e.type == "compaction/summary"]
    assert summaries == [summarizer.text] and summarizer.text.endswith(" messages.")


def test_a_plain_def_returning_an_awaitable_is_awaited() -> None:
    _session, result = compact(ReturnsAwaitable())
    assert result is not None and result.summary[0]["text"].startswith("## Primary Request and Intent")


@pytest.mark.parametrize("summarizer", [object(), type("NoMethod", (), {"summarize": 3})()])
def test_an_object_without_summarize_is_refused_with_a_type_error(summarizer: Any) -> None:
    name = type(summarizer).__name__
    with pytest.raises(TypeError, match=f"a summarizer needs a summarize.*{name} has none"):
        Compactor(summarizer)


def test_the_compact_cli_names_stay_public() -> None:
    assert {"Compactor", "ExtractiveSummarizer", "OpenAICompatibleSummarizer", "PrunerConfig",
            "ModelPolicy"} <= set(agentlog.__all__)
    assert PrunerConfig().threshold_chars > 0 and ModelPolicy is agentlog.ModelPolicy


def test_cancelling_a_compaction_waiting_on_a_plain_def_summarizer_closes_the_bracket() -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def summarize(self, request: SummaryRequest) -> SummaryResult:
            entered.set()
            release.wait(5)
            return PlainSummarizer().summarize(request)

    session, _recorder = session_with_turns(4)

    async def main() -> None:
        task = asyncio.ensure_future(Compactor(Slow()).acompact_now(session))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()  # the worker thread finishes; its result is discarded

    try:
        asyncio.run(main())
    finally:
        release.set()
    ends = [e for e in session.events if e.type == "compaction/end"]
    assert len(ends) == 1 and ends[0].data["error"] == "CancelledError"
    assert session.surface.replace_generation == 0

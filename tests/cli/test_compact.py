"""``agentlog compact``: offline by default, or an OpenAI-compatible endpoint on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agentlog import Recorder, SessionHeader, open_store
from tests.cli.conftest import crash, invoke, record, run
from tests.integrations.server import Provider, Reply, serve

BIG = "".join(f"line {n}: some file content that the summary will not repeat\n" for n in range(200))


def sse(*pieces: str) -> Reply:
    """A chat-completions stream answering ``pieces`` of text, then stop and usage."""
    def chunk(delta: dict[str, str], finish: str | None = None) -> str:
        body = {"id": "x", "object": "chat.completion.chunk", "model": "local-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body)}\n\n"

    frames = [chunk({"content": piece}) for piece in pieces] + [chunk({}, "stop")]
    usage = {"id": "x", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}}
    frames.append(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n")
    return Reply(body="".join(frames).encode(), headers={"content-type": "text/event-stream"})


@pytest.fixture
def provider() -> Iterator[Provider]:
    yield from serve()


def _types(url: str, session_id: str) -> list[str]:
    with open_store(url) as store:
        return [event.type for event in store.read_from(session_id, 0).events]


def test_compact_offline_writes_a_bracket_and_keeps_the_log(store_url: str) -> None:
    record(store_url, "long", turns=3, output=BIG)
    before = _types(store_url, "long")
    done = invoke(store_url, "compact", "long", "--json")
    assert done.exit_code == 0, done.output
    shape = json.loads(done.stdout)
    assert shape["compacted"] is True and shape["compaction"]["shadowedSeqs"] > 0
    after = _types(store_url, "long")
    assert after[:len(before)] == before  # nothing deleted or rewritten
    added = [kind for kind in after[len(before):] if kind != "session/end-seed"]  # opening marks a restore
    assert added == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert invoke(store_url, "verify", "long").exit_code == 0


def test_compact_in_a_real_process_and_a_session_with_nothing_to_compact(store_url: str) -> None:
    record(store_url, "long", turns=3, output=BIG)
    first = run(store_url, "compact", "long")
    assert first.returncode == 0, first.stderr
    assert "compacted" in first.stdout and "checkpoint at seq" in first.stdout
    assert run(store_url, "verify", "long").returncode == 0
    with open_store(store_url) as store, store.start(SessionHeader(id="empty")) as live, \
            Recorder(live).turn() as turn:
        turn.user_message("one message: the newest unit, never compacted")
    before = _types(store_url, "empty")
    nothing = invoke(store_url, "compact", "empty", "--json")
    assert nothing.exit_code == 0, nothing.output
    assert json.loads(nothing.stdout) == {"id": "empty", "compacted": False, "newTokens": None,
                                          "reason": "no compactable history yet", "compaction": None}
    assert "nothing to compact" in invoke(store_url, "compact", "empty").stdout
    assert _types(store_url, "empty") == before  # nothing to do: the session is not even opened


def test_compact_with_an_openai_compatible_endpoint(tmp_path: object, provider: Provider) -> None:
    url = f"jsonl://{tmp_path}/store"
    record(url, "long", turns=3, output=BIG)
    provider.queue(sse("## Goal\n", "Read README.md three times."))
    done = invoke(url, "compact", "long", "--llm", provider.base_url, "--model", "local-model", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["compacted"] is True
    (request,) = provider.requests
    assert request["model"] == "local-model" and request["stream"] is True
    with open_store(url) as store:
        summary = next(event for event in store.read_from("long", 0).events
                       if event.type == "compaction/summary")
    assert "Read README.md three times." in json.dumps(summary.data)


def test_compact_endpoint_failure_is_one_line_and_writes_no_summary(tmp_path: object,
                                                                    provider: Provider) -> None:
    url = f"jsonl://{tmp_path}/store"
    record(url, "long", turns=3, output=BIG)
    provider.queue(*[Reply(status=400, body=b'{"error": {"message": "bad model"}}',
                           headers={"content-type": "application/json"})] * 4)
    failed = invoke(url, "compact", "long", "--llm", provider.base_url, "--model", "nope")
    assert failed.exit_code == 1 and "Traceback" not in failed.output
    assert "error:" in failed.stderr
    assert "compaction/summary" not in _types(url, "long")
    assert invoke(url, "verify", "long").exit_code == 0  # a failed bracket leaves a loadable log


def test_compact_refuses_a_crashed_session_and_names_repair(store_url: str) -> None:
    crash(store_url, "c")
    refused = invoke(store_url, "compact", "c")
    assert refused.exit_code == 1
    assert "agentlog repair c" in refused.stderr


def test_compact_option_mistakes_are_usage_errors(tmp_path: object) -> None:
    url = f"jsonl://{tmp_path}/store"
    assert invoke(url, "compact", "x", "--llm", "http://127.0.0.1:9/v1").exit_code == 2
    assert invoke(url, "compact", "x", "--model", "m").exit_code == 2


def test_compact_again_with_nothing_new_does_not_summarize_the_summary(store_url: str) -> None:
    record(store_url, "long", turns=3, output=BIG)
    first = invoke(store_url, "compact", "long", "--json")
    assert first.exit_code == 0 and json.loads(first.stdout)["compacted"] is True, first.output
    before = _types(store_url, "long")
    again = invoke(store_url, "compact", "long", "--json")
    assert again.exit_code == 0, again.output
    shape = json.loads(again.stdout)
    assert shape["compacted"] is False and shape["compaction"] is None
    assert "previous checkpoint" in shape["reason"] and shape["newTokens"] == 0
    said = invoke(store_url, "compact", "long")
    assert said.exit_code == 0 and "nothing new to compact" in said.stdout, said.output
    assert _types(store_url, "long") == before  # no bracket, and the session was not even opened


def test_compact_report_gives_what_the_checkpoint_kept_per_category(store_url: str) -> None:
    record(store_url, "long", turns=3, output=BIG)
    done = invoke(store_url, "compact", "long", "--report")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert "checkpoint at seq" in lines[0]
    assert any(line.startswith("kept of the shadowed range's facts") for line in lines)
    for category in ("constraints", "tasks", "paths", "tool_results", "overall"):
        assert any(line.strip().startswith(category) for line in lines), (category, done.stdout)
    record(store_url, "more", turns=3, output=BIG)
    shape = json.loads(invoke(store_url, "compact", "more", "--report", "--json").stdout)
    report = shape["report"]
    assert [c["category"] for c in report["categories"]] == ["constraints", "tasks", "paths", "tool_results"]
    for category in report["categories"]:
        assert 0 <= category["kept"] <= category["total"]
        assert category["score"] is None if category["total"] == 0 else 0 <= category["score"] <= 1
    assert json.loads(invoke(store_url, "compact", "more", "--json").stdout).get("report") is None

"""The pure scrub (``agentlog.ops.scrub_text``): a planted secret never survives, wherever it is
split; text without it is unchanged byte for byte; seqs, types and the surface's shape are kept."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import MemoryStore, Recorder, SessionHeader
from agentlog.core.jsonvalue import dumps
from agentlog.core.session import Session
from agentlog.errors import UsageError
from agentlog.ops.scrub_text import Matcher, Secrets, found_secrets, marker, scrub_log
from tests.ops.scrub_sessions import OTHER, SECRET, record

_SECRETS = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=24).map(lambda s: f"sk-{s}")
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)


def _stream(secret: str, before: str, after: str, cuts: list[int]) -> tuple[str, list[str]]:
    whole = before + secret + after
    points = sorted({min(cut, len(whole)) for cut in cuts} | {0, len(whole)})
    return whole, [whole[a:b] for a, b in itertools.pairwise(points)] or [""]


def _session(pieces: list[str], text: str, extra: dict[str, Any] | None = None) -> Session:
    store = MemoryStore()
    with store.start(SessionHeader(id="p", cwd="/w", extra=extra or {})) as live:
        recorder = Recorder(live)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message(text)
            step.request_header({"config": {"provider": "x", "model": "m", "headers": {"X-Key": text}}})
            for piece in pieces:
                step.text_delta(piece)
            step.assistant()
    stored = store.inspect("p")
    return Session.restore("p", stored.events, stored.header)


def _bytes(session_events: list[Any], header: SessionHeader) -> bytes:
    return b"".join(event.to_json() for event in session_events) + dumps(header.to_wire())


@settings(max_examples=60, deadline=None)
@given(secret=_SECRETS, before=_TEXT, after=_TEXT, cuts=st.lists(st.integers(0, 80), max_size=8))
def test_a_secret_split_anywhere_never_survives(secret: str, before: str, after: str,
                                                cuts: list[int]) -> None:
    whole, pieces = _stream(secret, before, after, cuts)
    session = _session(pieces, whole, {"meta": whole})
    out = scrub_log(session.header, list(session.events), Secrets.of([(secret, "planted")]))
    assert secret.encode() not in _bytes(out.events, out.header)
    assert [(e.seq, e.type) for e in out.events] == [(e.seq, e.type) for e in session.events]
    joined = "".join(e.data["chunk"]["text"] for e in out.events if e.type == "assistant/chunk")
    assert joined == whole.replace(secret, marker("planted")) or secret not in joined
    restored = Session.restore("p", out.events, out.header)  # the log stays a valid log
    assert [m["role"] for m in restored.derive_messages()] == [m["role"] for m in session.derive_messages()]
    assert out.removed[secret][0] == "planted"


@settings(max_examples=60, deadline=None)
@given(text=_TEXT, cuts=st.lists(st.integers(0, 40), max_size=5), secret=_SECRETS)
def test_text_without_the_secret_is_unchanged(text: str, cuts: list[int], secret: str) -> None:
    if secret in text:
        return
    _, pieces = _stream("", text, "", cuts)
    session = _session(pieces, text, {"meta": text})
    out = scrub_log(session.header, list(session.events), Secrets.of([(secret, "planted")]))
    assert out.changed == [] and not out.header_changed and out.removed == {}
    assert _bytes(out.events, out.header) == _bytes(list(session.events), session.header)


def test_every_place_of_a_recorded_session_is_scrubbed() -> None:
    store = MemoryStore()
    record(store, "a")
    stored = store.inspect("a")
    before = _bytes(list(stored.events), stored.header)
    assert SECRET.encode() in before and OTHER.encode() in before
    secrets = Secrets.of([(SECRET, "key")], [r"hunter2-[a-z0-9-]+"])
    out = scrub_log(stored.header, list(stored.events), secrets)
    after = _bytes(out.events, out.header)
    assert SECRET.encode() not in after and OTHER.encode() not in after
    assert b"[SCRUBBED:key]" in after and b"[SCRUBBED:pattern-1]" in after
    assert out.header_changed and out.header.id == "a" and out.header.cwd == "/work/project"
    types = {stored.events[seq].type for seq in out.changed}
    assert {"user/message", "assistant/chunk", "assistant/message", "tool/call", "tool/result",
            "request/header", "compaction/summary"} <= types
    restored = Session.restore("a", out.events, out.header)
    original = Session.restore("a", stored.events, stored.header)
    assert [m["role"] for m in restored.derive_messages()] == [m["role"] for m in original.derive_messages()]


def test_until_leaves_later_events_alone() -> None:
    store = MemoryStore()
    record(store, "a", compact=False)
    stored = store.inspect("a")
    out = scrub_log(stored.header, list(stored.events), Secrets.of([(SECRET, "key")]), until=20)
    assert out.changed and max(out.changed) < 20
    assert all(out.events[i] is stored.events[i] for i in range(20, len(stored.events)))


def test_the_audit_finds_the_secret_with_its_seqs() -> None:
    store = MemoryStore()
    record(store, "a", compact=False)
    stored = store.inspect("a")
    found = found_secrets(stored.header, list(stored.events))
    kind, seqs = found[SECRET]
    assert kind == "openai-key" and None in seqs and 2 in seqs
    assert OTHER not in found


def test_patterns_are_checked() -> None:
    with pytest.raises(UsageError, match="not a regular expression"):
        Matcher(Secrets.of(patterns=["(unclosed"]))
    with pytest.raises(UsageError, match="empty string"):
        Matcher(Secrets.of(patterns=["x*"]))


def test_a_secret_that_is_not_valid_text_is_refused_not_silently_unmatched() -> None:
    """A byte the terminal's encoding could not decode arrives as a lone surrogate
    (surrogateescape): no stored event can hold one, so it would match nothing while the user
    believes the secret is gone. Refused, naming it escaped."""
    with pytest.raises(UsageError, match=r"--pattern 'ab\\udcff' is not valid Unicode text"):
        Matcher(Secrets.of(patterns=["ab\udcff"]))
    with pytest.raises(UsageError, match=r"secret 'sk-\\udcff' is not valid Unicode text"):
        Matcher(Secrets.of([("sk-\udcff", "text-file")]))


def test_overlapping_finds_merge_into_one_marker() -> None:
    matcher = Matcher(Secrets.of([("abcdef", "a"), ("defghi", "b")]))
    assert [span[:3] for span in matcher.spans("xxabcdefghiyy")] == [(2, 11, "a")]


@settings(max_examples=40, deadline=None)
@given(secret=st.text("ab\"\\\n\u2028xyz", min_size=4, max_size=12).filter(
           lambda s: len(set(s)) > 2 and any(c in s for c in "\"\\\n\u2028")),
       before=_TEXT)
def test_a_literal_json_would_escape_is_still_found(secret: str, before: str) -> None:
    session = _session([before, secret], before + secret)
    out = scrub_log(session.header, list(session.events), Secrets.of([(secret, "planted")]))
    messages = [e.data for e in out.events if e.type == "user/message"]
    assert all(secret not in part["text"] for message in messages for part in message["content"])
    texts = [e.data["chunk"]["text"] for e in out.events if e.type == "assistant/chunk"]
    assert secret not in "".join(texts)
    assert out.removed and Matcher(Secrets.of([(secret, "planted")])).may_match({"k": "none"})

"""AgentlogSession under the SDK's compaction wrappers: the snapshot hook they look up on the backend.

``OpenAIResponsesCompactionSession`` and ``EncryptedSession`` compact a backend atomically only
through its ``_get_compaction_snapshot``; over agentlog the replacement is a surface edit, so
the log still holds every original item.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import pytest
from agents import Agent, RunConfig, Runner
from agents.extensions.memory.encrypt_session import EncryptedSession
from agents.memory import OpenAIResponsesCompactionSession
from agents.testing import ScriptedModel
from cryptography.fernet import Fernet
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from agentlog import InvalidEventError, SqliteStore, check_invariants, thaw
from agentlog.core.events import USER_MESSAGE
from agentlog.integrations.openai_agents import AgentlogSession

HISTORY = [{"role": "user", "content": f"question {n}"} for n in range(4)]
SUMMARY = {"type": "compaction", "id": "cmp_1", "encrypted_content": "summary"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def logged_user_texts(path: Path, session_id: str) -> list[str]:
    store = SqliteStore(path)
    try:
        log = store.load(session_id)
    finally:
        store.close()
    check_invariants(log.events)
    return [thaw(e.data)["content"][0]["text"] for e in log.events if e.type == USER_MESSAGE
            and thaw(e.data)["content"]]


def test_the_snapshot_replaces_its_suffix_on_the_surface_and_the_log_keeps_the_originals(
        tmp_path: Path) -> None:
    session = AgentlogSession("snap", f"sqlite://{tmp_path / 'a.db'}")

    async def main() -> None:
        await session.add_items(HISTORY)
        snapshot = await session._get_compaction_snapshot(3)
        assert snapshot is not None
        assert snapshot.items == HISTORY[-3:] and not snapshot.complete
        assert (await session._get_compaction_snapshot(4)).complete
        assert await snapshot.replace_suffix(1, [SUMMARY]) is True
        assert await session.get_items() == [*HISTORY[:2], SUMMARY]
        assert await snapshot.replace_suffix(1, [SUMMARY]) is False  # its suffix is gone now

    run(main())
    session.close()
    assert logged_user_texts(tmp_path / "a.db", "snap") == [m["content"] for m in HISTORY]


@pytest.mark.parametrize("change", ["add", "pop", "clear"])
def test_a_snapshot_whose_suffix_changed_replaces_nothing(tmp_path: Path, change: str) -> None:
    session = AgentlogSession("stale", f"sqlite://{tmp_path / 'a.db'}")

    async def main() -> list[Any]:
        await session.add_items(HISTORY)
        snapshot = await session._get_compaction_snapshot(2)
        assert snapshot is not None
        if change == "add":
            await session.add_items([{"role": "user", "content": "later"}])
        elif change == "pop":
            await session.pop_item()
        else:
            await session.clear_session()
        before = await session.get_items()
        assert await snapshot.replace_suffix(0, [SUMMARY]) is False
        assert await snapshot.replace_suffix(2, [SUMMARY]) is False  # an empty suffix: nothing to do
        assert await session.get_items() == before
        return before

    run(main())
    session.close()


def test_prune_prefix_drops_the_leading_items_it_accepts_and_stops_at_the_first_it_does_not(
        tmp_path: Path) -> None:
    session = AgentlogSession("prune", f"sqlite://{tmp_path / 'a.db'}")
    expired = {"question 0", "question 1", "question 3"}

    async def main() -> None:
        await session.add_items([*HISTORY, {"role": "user", "content": "tail"}])
        snapshot = await session._get_compaction_snapshot(
            1, prune_prefix=lambda item: item["content"] in expired)
        assert snapshot is not None and snapshot.items == [{"role": "user", "content": "tail"}]
        assert await snapshot.replace_suffix(0, [SUMMARY])
        assert await session.get_items() == [*HISTORY[2:4], SUMMARY]

    run(main())
    session.close()


def test_a_subclass_that_changes_the_item_methods_gets_no_inherited_snapshot(tmp_path: Path) -> None:
    class Transforming(AgentlogSession):
        async def add_items(self, items: list[Any]) -> None:
            await super().add_items([{**item, "content": item["content"].upper()} for item in items])

    class Configured(AgentlogSession):
        pass

    for cls, offered in ((Transforming, False), (Configured, True)):
        session = cls(cls.__name__, f"sqlite://{tmp_path / 'a.db'}")
        assert (run(session._get_compaction_snapshot(1)) is not None) is offered
        session.close()


def compactor(output: list[Any]) -> MagicMock:
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=output))
    return client


@pytest.mark.parametrize("encrypted", [False, True])
def test_automatic_compaction_of_a_runner_turn_over_earlier_history_compacts_its_suffix(
        tmp_path: Path, encrypted: bool) -> None:
    """The model saw only the latest item (limit 1), so only a snapshot can scope the compaction."""
    backend = AgentlogSession("auto", f"sqlite://{tmp_path / 'a.db'}", session_settings={"limit": 1})
    client = compactor([SUMMARY])
    session: Any = OpenAIResponsesCompactionSession("auto", backend, client=client, compaction_mode="input",
                                                    should_trigger_compaction=lambda _context: True)
    if encrypted:
        session = EncryptedSession("auto", session, encryption_key=Fernet.generate_key().decode())
    text = ResponseOutputText(type="output_text", text="ok", annotations=[])
    answer = ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                   content=[text])
    model = ScriptedModel(steps=[[answer]])

    async def main() -> list[Any]:
        await session.add_items(HISTORY)
        await Runner.run(Agent(name="worker", model=model), "hello", session=session,
                         run_config=RunConfig(tracing_disabled=True))
        return list(await session.get_items(limit=100))

    items = run(main())
    client.responses.compact.assert_awaited_once()
    sent = client.responses.compact.await_args.kwargs["input"]
    assert [item.get("content") for item in sent][:2] == ["question 3", "hello"]
    assert items == [*HISTORY[:3], SUMMARY]  # the suffix the model saw, compacted; nothing skipped
    backend.close()
    if not encrypted:
        assert logged_user_texts(tmp_path / "a.db", "auto") == [*(m["content"] for m in HISTORY), "hello"]


@pytest.mark.parametrize("bad", [{"role": "user", "content": object()},
                                 {"role": "user", "content": "\ud800"}])
def test_a_refused_replacement_changes_nothing(tmp_path: Path, bad: dict[str, Any]) -> None:
    session = AgentlogSession("refused", f"sqlite://{tmp_path / 'a.db'}")

    async def main() -> None:
        await session.add_items(HISTORY)
        snapshot = await session._get_compaction_snapshot(2, prune_prefix=lambda _item: True)
        assert snapshot is not None
        seq = session.live.session.seq
        with pytest.raises(InvalidEventError):
            await snapshot.replace_suffix(0, [SUMMARY, bad])
        assert session.live.session.seq == seq
        assert await session.get_items() == HISTORY
        assert await snapshot.replace_suffix(0, [SUMMARY])  # the snapshot is still good

    run(main())
    session.close()


def test_a_cancelled_replacement_settles_before_a_newer_append(tmp_path: Path) -> None:
    session = AgentlogSession("cancelled", f"sqlite://{tmp_path / 'a.db'}")
    entered, release = threading.Event(), threading.Event()
    newer = {"role": "user", "content": "newer"}

    def paused(_item: Any) -> bool:  # runs inside the replacement, under the session's lock
        entered.set()
        assert release.wait(10)
        return False

    async def main() -> None:
        await session.add_items(HISTORY)
        snapshot = await session._get_compaction_snapshot(2, prune_prefix=paused)
        assert snapshot is not None
        replacing = asyncio.create_task(snapshot.replace_suffix(0, [SUMMARY]))
        assert await asyncio.to_thread(entered.wait, 5)
        for _ in range(2):
            replacing.cancel()
            await asyncio.sleep(0)
        assert not replacing.done()  # the outcome is not known yet
        appending = asyncio.create_task(session.add_items([newer]))
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await replacing
        await appending
        assert await session.get_items() == [*HISTORY[:2], SUMMARY, newer]

    run(main())
    session.close()


def test_a_pop_with_the_wrong_key_leaves_the_ciphertext_in_the_log_and_a_fork_brings_it_back(
        tmp_path: Path) -> None:
    """What agentlog guarantees where EncryptedSession keeps its authenticated pop for SQLiteSession."""
    url, key = f"sqlite://{tmp_path / 'a.db'}", Fernet.generate_key().decode()
    backend = AgentlogSession("enc", url)
    run(EncryptedSession("enc", backend, key).add_items(HISTORY[:2]))
    before_pop = backend.live.session.seq - 1
    assert run(EncryptedSession("enc", backend, Fernet.generate_key().decode()).pop_item()) is None
    assert run(backend.get_items()) == []  # the SDK's delegated pop drained what it could not read
    backend.close()
    store = SqliteStore(tmp_path / "a.db")
    store.fork("enc", before_pop, "enc-restored").close()
    store.close()
    restored = AgentlogSession("enc-restored", url)
    # the key is derived with the session id as salt: read the fork as "enc"
    assert run(EncryptedSession("enc", restored, key).get_items()) == HISTORY[:2]
    restored.close()

"""A lazily created session whose first append is refused is forgotten (issue 13 holes).

``create`` records a header in memory only; when the first append is refused (a validation
error, a poison string, a gap), the store does not keep that header: the session does not
exist (list, load, inspect, delete say so), nothing of it is left in storage, and the same id
can be started again.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentlog import AgentlogError, SessionHeader, SessionNotFoundError
from agentlog.store.base import Store
from agentlog.store.jsonl.format import encode_session_id
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.sqlite.store import SqliteStore
from tests.contract.conftest import StoreFactory

SID = "first-refused"
START = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}
REFUSED: dict[str, list[dict[str, Any]]] = {
    "invalid-message": [START, {"type": "user/message", "seq": 1, "time": 1, "surfaceOp": "append",
                                "data": {"id": "m", "role": "user", "source": {"kind": "user"},
                                         "content": "hi"}}],
    "poison-type": [{"type": "session/\ud800", "seq": 0, "time": 1, "data": {}}],
    "poison-data": [{"type": "session/title", "seq": 0, "time": 1, "data": {"title": "\ud800"}}],
    "gap": [START, {"type": "turn/start", "seq": 2, "time": 1, "data": {"turn": 2}}],
    "not-at-zero": [{"type": "session/title", "seq": 3, "time": 1, "data": {"title": "t"}}],
}


def leftovers(store: Store, session_id: str) -> list[str]:
    """What storage still holds of ``session_id``: rows, transcripts, lock files."""
    found = ["stored"] if store._stored_exists(session_id) else []
    if isinstance(store, JsonlStore):
        name = encode_session_id(session_id)
        found += [str(path) for path in store.root.rglob("*") if name in path.name]
    if isinstance(store, SqliteStore) and not store.memory:
        found += [str(path) for path in [store._lock_path(session_id)] if path.exists()]
    return found


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_session_whose_first_append_is_refused_does_not_exist(open_store: StoreFactory, case: str) -> None:
    store = open_store()
    store.create(SessionHeader(id=SID, created_at=1))
    with pytest.raises(AgentlogError) as refused:
        store.append(SID, REFUSED[case])
    assert refused.value.session_id == SID
    for reader in (store, open_store()):
        assert [header.id for header in reader.list()] == []
        assert reader.listing().unreadable == []
        for read in (reader.load, reader.inspect, reader.delete):
            with pytest.raises(SessionNotFoundError):
                read(SID)
        with pytest.raises(SessionNotFoundError):
            reader.append(SID, [START])  # no header is remembered for a later append
    assert leftovers(store, SID) == []


def test_the_id_of_a_refused_first_append_starts_again(open_store: StoreFactory) -> None:
    store = open_store()
    store.create(SessionHeader(id=SID, created_at=1, cwd="/first"))
    with pytest.raises(AgentlogError):
        store.append(SID, REFUSED["invalid-message"])
    with store.start(SessionHeader(id=SID, created_at=2, cwd="/second")) as live:
        live.session.append("session/title", {"title": "second"})
    store.create(SessionHeader(id="cold", created_at=1))
    with pytest.raises(AgentlogError):
        store.append("cold", REFUSED["poison-type"])
    store.create(SessionHeader(id="cold", created_at=1))
    store.append("cold", [{"type": "session/title", "seq": 0, "time": 1, "data": {"title": "t"}}])
    again = open_store()
    assert sorted(header.id for header in again.list()) == ["cold", SID]
    assert again.load(SID).header.cwd == "/second"
    assert [event.data["title"] for event in again.load(SID).events] == ["second"]


def test_a_refused_later_append_keeps_the_session(open_store: StoreFactory) -> None:
    store = open_store()
    store.create(SessionHeader(id=SID, created_at=1))
    store.append(SID, [START])
    with pytest.raises(AgentlogError):
        store.append(SID, REFUSED["invalid-message"][1:])
    assert [event.type for event in store.read_from(SID, 0).events] == ["turn/start"]
    assert [header.id for header in open_store().list()] == [SID]

"""Legacy logs through every store backend (spec persistence §6.2; §9 coordinator-contract.ts 10-12).

Legacy events are written through ``Store.append`` (which, like DSH's, refuses only retired
types), then read back by a fresh store instance so every read decodes stored lines or rows.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentlog import (
    FrozenDict,
    InvalidEventError,
    Session,
    SessionCorruptionError,
    SessionHeader,
    UsageError,
)
from agentlog.core.jsonvalue import thaw
from agentlog.store.base import Store
from agentlog.store.records import Inspection
from tests.contract.conftest import StoreFactory
from tests.contract.logs import plant
from tests.legacy_logs import (
    MALFORMED_LEGACY,
    STEERING_MESSAGE_ID,
    UPGRADED_TURN_ENDS,
    legacy_message_log,
    pre_react_loop_log,
)


def put(store: Store, session_id: str, log: list[dict[str, Any]]) -> None:
    store.create(SessionHeader(id=session_id, created_at=1000, cwd="/w"))
    store.append(session_id, log)


def put_foreign(store: Store, session_id: str, log: list[dict[str, Any]]) -> None:
    """A log agentlog's own append refuses (a load would): as another writer left it."""
    with pytest.raises(InvalidEventError):
        put(store, session_id, log)
    plant(store, SessionHeader(id=session_id, created_at=1000, cwd="/w"), log)


def message_ids(view: Inspection) -> list[str]:
    ids = []
    for event in view.events:
        if event.type == "user/message":
            ids.append(event.data["id"])
        elif event.type in ("assistant/message", "tool/result"):
            ids.append(event.data["message"]["id"])
    return ids


def revision(store: Store, session_id: str) -> str:
    return next(s.revision for s in store.list_snapshots() if s.header.id == session_id)


# -- 10. pre-identity logs ---------------------------------------------------------------------------


def test_pre_identity_log_loads_with_legacy_ids_and_an_inherited_replacement_id(
    open_store: StoreFactory,
) -> None:
    sid = "legacy-message-load"
    put(open_store(), sid, legacy_message_log())
    store = open_store()
    before = revision(store, sid)
    expected = [f"legacy-message:{sid}:{seq}" for seq in (1, 3, 5, 5)]
    for view in (store.inspect(sid), store.load(sid)):
        assert message_ids(view) == expected
        messages = [e.data if e.type == "user/message" else e.data["message"]
                    for e in view.events if e.type in ("user/message", "assistant/message", "tool/result")]
        assert all(type(message) is FrozenDict for message in messages)
        resumed = Session.restore(sid, view.events, view.header)
        assert [m["id"] for m in resumed.derive_messages()] == expected[:3]
    suffix = store.read_from(sid, 6)
    assert (suffix.events[0].type, suffix.events[0].seq) == ("tool/result", 6)
    assert suffix.events[0].data["message"]["id"] == f"legacy-message:{sid}:5"
    assert revision(store, sid) == before  # nothing was rewritten


def test_opened_pre_identity_session_continues_without_rewriting_its_legacy_prefix(
    open_store: StoreFactory,
) -> None:
    sid = "legacy-resume"
    put(open_store(), sid, legacy_message_log())
    live = open_store().open(sid)
    assert live.session.derive_messages()[0]["id"] == f"legacy-message:{sid}:1"
    live.close()
    reread = open_store()
    assert message_ids(reread.read_from(sid, 0))[0] == f"legacy-message:{sid}:1"
    assert [e.type for e in reread.load(sid).events][-1] == "session/end-seed"


def test_jsonl_artifact_keeps_its_legacy_lines(open_store: StoreFactory, backend: str) -> None:
    sid = "legacy-raw"
    put(open_store(), sid, legacy_message_log())
    store = open_store()
    store.load(sid)
    store.read_from(sid, 6)
    try:
        raw = store.read_raw(sid)
    except UsageError:
        pytest.skip(f"the {backend} store keeps no raw artifact")
    assert raw is not None
    assert "legacy-message" not in raw.content
    assert '"provenance":{"provider":"mock","model":"mock"}' in raw.content


# -- 11. pre-react-loop logs -------------------------------------------------------------------------


def test_pre_react_loop_log_reads_in_the_current_vocabulary(open_store: StoreFactory) -> None:
    sid = "pre-react-loop-load"
    put(open_store(), sid, pre_react_loop_log())
    store = open_store()
    for view in (store.inspect(sid), store.read_from(sid, 0), store.load(sid)):
        assert not any(e.type == "steering/message" for e in view.events)
        assert [thaw(e.data) for e in view.events if e.type == "turn/start"] == [
            {"turn": n} for n in range(1, 8)]
        assert [thaw(e.data) for e in view.events if e.type == "turn/end"] == UPGRADED_TURN_ENDS
        resumed = Session.restore(sid, view.events, view.header)
        assert [thaw(m["content"]) for m in resumed.derive_messages()] == [
            [{"type": "text", "text": "old prompt"}], [{"type": "text", "text": "old steering"}]]
    suffix = store.read_from(sid, 3)
    assert (suffix.events[0].type, suffix.events[0].seq) == ("user/message", 3)
    assert suffix.events[0].data["id"] == STEERING_MESSAGE_ID
    assert all("step" not in e.data for e in suffix.events if e.type == "turn/end")


def test_flat_steering_message_reads_as_an_identified_user_message(open_store: StoreFactory) -> None:
    sid = "pre-react-loop-flat-steering"
    put(open_store(), sid, [{"type": "steering/message", "seq": 0, "time": 1, "surfaceOp": "append",
                             "data": {"turn": 1, "content": [{"type": "text", "text": "flat steering"}],
                                      "source": {"kind": "user"}}}])
    first = open_store().inspect(sid).events[0]
    assert first.type == "user/message"
    assert (first.data["id"], first.data["role"]) == (f"legacy-message:{sid}:0", "user")
    assert thaw(first.data["content"]) == [{"type": "text", "text": "flat steering"}]


def test_unknown_current_turn_end_reason_passes_through(open_store: StoreFactory) -> None:
    sid = "current-extended-turn-end"
    put(open_store(), sid, [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "turn/end", "seq": 1, "time": 2,
         "data": {"turn": 1, "reason": {"kind": "extension-reason"}}},
    ])
    store = open_store()
    for view in (store.inspect(sid), store.read_from(sid, 1)):
        assert thaw(view.events[-1].data) == {"turn": 1, "reason": {"kind": "extension-reason"}}


# -- 12. malformed stored events ---------------------------------------------------------------------


def test_wrong_message_role_is_refused_on_inspect_and_load(open_store: StoreFactory) -> None:
    sid = "invalid-message-read"
    put_foreign(open_store(), sid, [{"type": "user/message", "seq": 0, "time": 1, "surfaceOp": "append",
                                     "data": {
        "id": "wrong-role", "role": "assistant", "content": [{"type": "text", "text": "wrong"}],
        "source": {"kind": "user"}}}])
    store = open_store()
    for read in (store.inspect, store.load):
        with pytest.raises(SessionCorruptionError, match='message must have role "user"'):
            read(sid)


@pytest.mark.parametrize(("name", "wire", "fragment"), MALFORMED_LEGACY, ids=[m[0] for m in MALFORMED_LEGACY])
def test_malformed_legacy_shape_is_refused_on_inspect_load_and_read_from(
    open_store: StoreFactory, name: str, wire: dict[str, Any], fragment: str,
) -> None:
    put_foreign(open_store(), name, [wire])
    store = open_store()
    for read in (store.inspect, store.load):
        with pytest.raises(SessionCorruptionError, match=fragment) as info:
            read(name)
        assert info.value.session_id == name
    with pytest.raises(InvalidEventError, match=fragment) as plain:
        store.read_from(name, 0)
    assert (plain.value.session_id, plain.value.seq) == (name, 0)


@pytest.mark.parametrize(("kind", "data"), [
    ("tool/result", {"message": None}),
    ("user/message", {}),
    ("assistant/message", {}),
])
def test_message_event_without_an_identified_message_is_refused(
    open_store: StoreFactory, kind: str, data: Any,
) -> None:
    sid = f"invalid-{kind.replace('/', '-')}"
    put_foreign(open_store(), sid, [{"type": kind, "seq": 0, "time": 1, "surfaceOp": "append", "data": data}])
    store = open_store()
    with pytest.raises(SessionCorruptionError, match="lacks an identified message"):
        store.inspect(sid)
    with pytest.raises(InvalidEventError, match="lacks an identified message"):
        store.read_from(sid, 0)


def test_ignorable_unknown_event_with_null_data_is_accepted(open_store: StoreFactory) -> None:
    sid = "non-object-plugin-event"
    put(open_store(), sid, [{"type": "plugin/test", "seq": 0, "time": 1, "data": None, "ignorable": True}])
    store = open_store()
    for view in (store.inspect(sid), store.read_from(sid, 0)):
        assert [(e.type, e.data, e.ignorable) for e in view.events] == [("plugin/test", None, True)]


def test_a_fork_of_a_legacy_parent_names_its_prefix_messages_after_the_parent(
    open_store: StoreFactory,
) -> None:
    put(open_store(), "parent", legacy_message_log())
    parent_ids = [f"legacy-message:parent:{seq}" for seq in (1, 3, 5, 5)]
    store = open_store()
    with store.fork("parent", 8, "kid") as live:  # memory copies; JSONL, SQLite, PostgreSQL reference
        assert message_ids(Inspection(live.session.header, live.session.events)) == parent_ids
        live.session.append("turn/start", {"turn": 2})
        live.session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    for reader in (open_store(), store):
        assert message_ids(reader.load("kid")) == parent_ids  # as the live fork and a copied fork
        assert message_ids(reader.inspect("kid")) == parent_ids
        assert reader.read_from("kid", 6).events[0].data["message"]["id"] == "legacy-message:parent:5"
        assert reader.read_from("kid", 1).events[0].data["id"] == "legacy-message:parent:1"
    store.materialize("kid")  # a full copy holds the prefix as the parent reads it: the ids stay
    assert message_ids(open_store().load("kid")) == parent_ids
    assert message_ids(open_store().load("parent")) == parent_ids


def test_search_finds_legacy_steering_text_as_the_upgraded_user_message(open_store: StoreFactory) -> None:
    from tests.search_sessions import assert_index_equals_scan

    put(open_store(), "pre-react-loop-search", pre_react_loop_log())
    found = assert_index_equals_scan(open_store(), "OLD STEERING")
    assert [(hit.session_id, hit.seq, hit.type, hit.role) for hit in found] == [
        ("pre-react-loop-search", 3, "user/message", "user")]

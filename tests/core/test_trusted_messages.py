"""A checkpoint's messages, frozen without re-validation, are exactly what was written; equal
short strings and small flat objects are shared between messages (one object, less memory)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from agentlog.core.checkpoint import trusted_messages
from agentlog.core.jsonvalue import FrozenDict, freeze
from tests.strategies import json_text, json_values

members = json_values(max_leaves=12, tuples=False)
messages = st.lists(st.dictionaries(json_text, members, max_size=5), max_size=8)


def parsed(values: list[Any]) -> list[Any]:
    return [orjson.loads(orjson.dumps(value)) for value in values]


@given(messages)
def test_trusted_messages_are_the_frozen_json_that_was_written(values: list[dict[str, Any]]) -> None:
    trusted = trusted_messages(iter(parsed(values)))
    assert trusted is not None
    assert trusted == [freeze(value) for value in values]
    assert orjson.dumps(trusted) == orjson.dumps(values)  # true is not 1, 1.0 is not 1


def test_equal_members_of_different_json_types_stay_apart() -> None:
    values = [{"a": 1}, {"a": True}, {"a": 1.0}, {"a": 0}, {"a": False}, {"a": 0.0}, {"a": None}, {"a": "1"}]
    trusted = trusted_messages(iter(parsed(values)))
    assert trusted is not None
    assert orjson.dumps(trusted) == orjson.dumps(values)
    kinds = [int, bool, float, int, bool, float, type(None), str]
    assert [type(message["a"]) for message in trusted] == kinds


def test_equal_short_strings_and_small_flat_objects_are_one_object() -> None:
    source = {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"}
    values = [{"role": "assistant", "content": [{"type": "text", "text": "x" * 100}], "source": source}
              for _ in range(3)]
    trusted = trusted_messages(iter(parsed(values)))
    assert trusted is not None
    first, second = trusted[0], trusted[1]
    assert first["role"] is second["role"]
    assert first["source"] is second["source"] and type(first["source"]) is FrozenDict
    assert first["content"][0] is not second["content"][0]  # holds a long string: not looked up
    assert first is not second

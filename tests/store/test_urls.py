"""``open_store`` and ``default_store_url``: an empty store URL is an error, never the default store."""

from __future__ import annotations

import pytest

from agentlog.errors import UsageError
from agentlog.store.urls import default_store_url, open_store


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_agentlog_store_is_an_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("AGENTLOG_STORE", value)
    with pytest.raises(UsageError, match="empty"):
        default_store_url()


def test_an_unset_agentlog_store_means_the_default_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTLOG_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "/data")
    assert default_store_url() == "jsonl:///data/agentlog/sessions"


def test_an_empty_url_opens_nothing() -> None:
    with pytest.raises(UsageError, match="needs a directory"):
        open_store("")

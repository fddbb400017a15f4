"""``open_store`` and ``default_store_url``: an empty store URL is an error, never the default store."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize("url", ["jsonl://tmp/x", "sqlite://data/a.db", "jsonl://host.example/srv/x"])
def test_a_store_url_with_a_host_is_refused_naming_the_spellings(url: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="as a host") as refused:
        open_store(url)
    scheme, rest = url.split("://")
    assert f"{scheme}:///{rest}" in str(refused.value) and f"{scheme}:{rest}" in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # nothing created under the working directory


@pytest.mark.parametrize("url", ["jsonl:rel/x", "rel/x", "sqlite:rel/a.db", "jsonl://localhost/ABS"])
def test_relative_and_local_spellings_still_open(url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = url.replace("/ABS", str(tmp_path / "abs"))
    store = open_store(url)
    store.close()


def test_an_error_names_its_file_once() -> None:
    from agentlog.errors import StoreError

    assert str(StoreError("no store at /x/y (nothing to read)", file="/x/y")).count("/x/y") == 1
    assert str(StoreError("damaged frame", file="/x/y")) == "damaged frame [/x/y]"
    assert str(StoreError("damaged frame in /x/y", file="/x/y", offset=7)).endswith("[/x/y at byte 7]")


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_four_slashes_name_the_same_absolute_path(tmp_path: Path, scheme: str) -> None:
    from agentlog import Recorder, SessionHeader

    name = "a.db" if scheme == "sqlite" else "root"
    url = f"{scheme}:///{tmp_path / name}"  # SQLAlchemy's sqlite:////abs/path spelling
    with open_store(url) as four, four.start(SessionHeader(id="s")) as live, Recorder(live).turn() as turn:
        turn.user_message("hi")
    assert (tmp_path / name).exists()
    with open_store(f"{scheme}://{tmp_path / name}", create=False) as three:
        assert [header.id for header in three.list()] == ["s"]


def test_a_url_that_does_not_parse_is_refused_naming_it() -> None:
    """``jsonl://\x1b[31m...`` reads as an unclosed IPv6 host: urlsplit's bare ValueError named nothing."""
    with pytest.raises(UsageError, match="not a store URL") as refused:
        open_store("jsonl://\x1b[31mevil/y")
    assert "\\x1b[31mevil/y" in str(refused.value) and "\x1b" not in str(refused.value)  # named, escaped

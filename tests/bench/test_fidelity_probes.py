"""The fidelity probes: frozen by hash, well formed, matched paraphrase-tolerantly, scored on real data."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agentlog.bench.fidelity import CANDIDATES, evaluate, fidelity_markdown, load_compactions, transcript_text
from agentlog.bench.probes import (
    PROBE_CATEGORIES,
    Probe,
    load_probe_sets,
    probe_digest,
    probe_file_bytes,
    recalled,
    score,
    windows,
)
from agentlog.compaction.tokens import Pricer

PROBES_SHA256 = "a83b5365d1269d78f2a22237e96a5c4bc64c4eedfa6dfc9437b5428049845d91"
"""Changing a probe changes this hash: the probes were written before any summary was read and
must not be tuned to a summarizer afterwards. Update it only with a commit that says why."""


def test_the_probe_file_is_frozen_by_its_hash() -> None:
    assert probe_digest() == PROBES_SHA256


def test_every_session_has_probes_in_every_category() -> None:
    sets = load_probe_sets()
    assert len(sets) == 5
    for probe_set in sets:
        categories = {p.category for p in probe_set.probes}
        assert categories == set(PROBE_CATEGORIES), probe_set.session
    assert sum(len(s.probes) for s in sets) == 160


def probe(*groups: tuple[str, ...]) -> Probe:
    return Probe("x", "results", "fact", tuple(tuple(t.casefold() for t in g) for g in groups))


def test_a_probe_matches_any_alternative_of_every_group_within_three_lines() -> None:
    fact = probe(("sandbox",), ("shared", "auto"))
    assert recalled(fact, score_windows("The **Sandbox** ran in `:shared` mode"))
    assert recalled(fact, score_windows("sandbox checkout\nthen\nmode shared"))
    assert not recalled(fact, score_windows("sandbox checkout\n1\n2\nmode shared"))
    assert not recalled(fact, score_windows("sandbox only"))


def test_terms_start_at_a_word_and_numbers_stand_alone() -> None:
    assert not recalled(probe(("push",),), score_windows("this.pushEvent(x)"))
    assert recalled(probe(("push",),), score_windows("Pushed the branch"))
    assert not recalled(probe(("386",),), score_windows("ran 3861 tests"))
    assert recalled(probe(("386",),), score_windows("386 tests, 0 failures"))
    assert not recalled(probe(("oban",),), score_windows("ash_oban compiled"))
    assert recalled(probe(("add_state",),), score_windows("migrations/20260211205820_add_state.exs"))
    assert recalled(probe(("conntest",),), score_windows("import Phoenix.ConnTest.get/2"))


def score_windows(text: str) -> list[str]:
    return windows(text)


def test_malformed_probes_are_refused_with_their_id() -> None:
    bad = {"sessions": [{"session": "s1", "probes": [{"id": "c1", "category": "vibes", "all": [["x"]]}]}]}
    with pytest.raises(ValueError, match=r"probe s1/c1: unknown category 'vibes'"):
        load_probe_sets(orjson.dumps(bad))
    empty = {"sessions": [{"session": "s1", "probes": [{"id": "c2", "category": "paths", "all": [[]]}]}]}
    with pytest.raises(ValueError, match=r"probe s1/c2: 'all' must be"):
        load_probe_sets(orjson.dumps(empty))


def test_the_score_counts_per_category() -> None:
    probes = [Probe("a", "paths", "", (("a.ex",),)), Probe("b", "paths", "", (("b.ex",),)),
              Probe("c", "tasks", "", (("todo",),))]
    result = score(probes, "edited a.ex\nTODO: the rest")
    assert result.by_category == {"paths": (1, 2), "tasks": (1, 1)}
    assert result.recall() == pytest.approx(2 / 3)
    assert result.recall("paths") == 0.5


def test_the_probe_file_ships_as_package_data() -> None:
    assert orjson.loads(probe_file_bytes())["format"] == 1


def test_the_evaluation_on_the_real_compactions(shared_data: Path) -> None:
    compactions = load_compactions(shared_data / "transcripts")
    assert [c.session_id[:8] for c in compactions] == [
        "258c7280", "4d5611e5", "8463c716", "ae4a77f8", "fa812bfe"]
    rows = evaluate(compactions[:1], load_probe_sets(), Pricer().text, CANDIDATES[:1] + CANDIDATES[2:3])
    by = {(r.candidate, r.size): r for r in rows}
    claude = by[("Claude", "claude")]
    assert claude.chars == len(compactions[0].summary)
    for size in ("chars", "tokens"):
        extractive = by[("agentlog extractive", size)]
        assert extractive.chars <= claude.chars
    assert by[("agentlog extractive", "tokens")].tokens <= claude.tokens
    first = by[("first N characters", "chars")]
    assert first.chars == claude.chars
    assert transcript_text(compactions[0].messages).startswith("user: Implement spotter-gqc")
    table = fidelity_markdown(rows)
    assert "| Claude (own size) |" in table and "| agentlog extractive (equal tokens) |" in table

"""Compaction and pruner configuration (spec §7, P1; compaction-basic config tests)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentlog.compaction.config import (
    PRUNE_MARKER,
    CompactionConfig,
    ModelPolicy,
    PrunerConfig,
)
from agentlog.errors import CompactionConfigError, TargetPressureConfigError


def test_defaults_are_frozen() -> None:
    config = CompactionConfig()
    assert (
        config.threshold_ratio,
        config.retain_ratio,
        config.retain_tokens,
        config.summarization_provider,
        config.summarization_model,
        config.max_tokens,
        config.compaction_retries,
        config.max_overflow_retries,
        config.model_policies,
        config.auto,
    ) == (0.8, 0.16, None, "", "", 8192, 1, 1, (), True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_tokens = 1  # type: ignore[misc]


def test_threshold_and_retention_resolve_independently_and_retain_tokens_drops_the_ratio() -> None:
    assert CompactionConfig(threshold_ratio=0.5).resolve("p", "m").retain_ratio == 0.16
    config = CompactionConfig(retain_tokens=300)
    policy = config.resolve("p", "m")
    assert (policy.retain_ratio, policy.retain_tokens, policy.threshold_ratio) == (None, 300, 0.8)


def test_exact_pair_overrides_scale_per_target() -> None:
    config = CompactionConfig(
        retain_tokens=200,
        model_policies=(
            ModelPolicy("p1", "m", threshold_ratio=0.5, retain_ratio=0.12),
            ModelPolicy("p3", "m", threshold_ratio=0.6, retain_ratio=0.2, max_tokens=100),
        ),
    )
    budget = config.resolve("p1", "m").scale(1000)
    assert (budget.threshold_tokens, budget.retain_tokens) == (500, 120)
    budget = config.resolve("p2", "m").scale(2000)  # same model id, another provider: the defaults
    assert (budget.threshold_tokens, budget.retain_tokens) == (1600, 200)
    override = config.resolve("p3", "m")
    budget = override.scale(2000)  # the ratio replaces the inherited absolute retention
    assert (budget.threshold_tokens, budget.retain_tokens) == (1200, 400)
    assert override.max_tokens == 100 and override.compaction_retries == 1


def test_the_summarization_pair_is_inherited_cleared_or_replaced_as_a_pair() -> None:
    config = CompactionConfig(
        summarization_provider="sp",
        summarization_model="sm",
        model_policies=(
            ModelPolicy("a", "m", summarization_provider="", summarization_model=""),
            ModelPolicy("b", "m", summarization_provider="xp", summarization_model="xm"),
        ),
    )
    assert (
        config.resolve("z", "m").summarization_provider,
        config.resolve("z", "m").summarization_model,
    ) == ("sp", "sm")
    assert config.resolve("a", "m").summarization_provider == ""
    assert config.resolve("b", "m").summarization_model == "xm"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold_ratio": 0},
        {"threshold_ratio": 1.5},
        {"threshold_ratio": True},
        {"retain_ratio": -0.1},
        {"retain_ratio": 0.9},
        {"retain_ratio": 0.1, "retain_tokens": 5},
        {"retain_tokens": -1},
        {"retain_tokens": 1.5},
        {"summarization_provider": "p"},
        {"summarization_model": "m"},
        {"max_tokens": 0},
        {"compaction_retries": -1},
        {"max_overflow_retries": 0.5},
        {"auto": "yes"},
        {"min_new_tokens": -1},
        {"min_new_tokens": 2.5},
        {"model_policies": (ModelPolicy("p", "m"), ModelPolicy("p", "m"))},
        {"model_policies": (ModelPolicy("p", "m", retain_ratio=0.9),)},
        {"model_policies": ({"provider": "p", "model": "m"},)},
    ],
)
def test_invalid_settings_are_refused_at_load(kwargs: dict[str, Any]) -> None:
    with pytest.raises(CompactionConfigError):
        CompactionConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"provider": "", "model": "m"},
        {"provider": "p", "model": ""},
        {"provider": "p", "model": "m", "summarization_provider": "x"},
        {"provider": "p", "model": "m", "summarization_provider": "x", "summarization_model": ""},
        {"provider": "p", "model": "m", "retain_ratio": 0.1, "retain_tokens": 4},
    ],
)
def test_invalid_model_policies_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(CompactionConfigError):
        ModelPolicy(**kwargs)


def test_runtime_budgets_refuse_retention_at_or_above_the_threshold_and_bad_windows() -> None:
    policy = CompactionConfig(retain_tokens=800).resolve("p", "m")
    with pytest.raises(TargetPressureConfigError, match="not below the threshold"):
        policy.scale(1000, "p/m")
    for window in (0, -5, 1.5, None):
        with pytest.raises(TargetPressureConfigError, match="positive integer"):
            CompactionConfig().resolve("p", "m").scale(window)


def test_camel_case_mappings_load_and_unknown_keys_are_refused() -> None:
    config = CompactionConfig.from_mapping(
        {
            "thresholdRatio": 0.7,
            "retainTokens": 10,
            "modelPolicies": [{"provider": "p", "model": "m", "maxOverflowRetries": 0}],
        }
    )
    assert config.threshold_ratio == 0.7 and config.retain_ratio is None
    assert CompactionConfig.from_mapping({"minNewTokens": 500}).min_new_tokens == 500
    assert config.resolve("p", "m").max_overflow_retries == 0
    with pytest.raises(CompactionConfigError, match="unknown compaction config key 'contextWindow'"):
        CompactionConfig.from_mapping({"contextWindow": 1000})
    with pytest.raises(CompactionConfigError, match="unknown model policy key"):
        CompactionConfig.from_mapping({"modelPolicies": [{"provider": "p", "model": "m", "window": 1}]})


def test_pruner_defaults_and_validation() -> None:
    config = PrunerConfig()
    assert (config.threshold_chars, config.head_chars, config.tail_chars) == (8192, 4096, 1024)
    assert len(PRUNE_MARKER) == 39
    for bad in (
        {"threshold_chars": 0},
        {"head_chars": -1},
        {"tail_chars": 1.0},
        {"threshold_chars": 100, "head_chars": 31, "tail_chars": 31},
    ):
        with pytest.raises(CompactionConfigError):
            PrunerConfig(**bad)
    assert PrunerConfig(threshold_chars=100, head_chars=30, tail_chars=31).head_chars == 30
    with pytest.raises(CompactionConfigError, match="maxChars"):
        PrunerConfig.from_mapping({"maxChars": 10})
    assert PrunerConfig.from_mapping({"headChars": 10}).head_chars == 10

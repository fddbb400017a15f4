"""Compaction and pruner configuration with load-time validation (spec compaction §3, §5 P1, §7).

``CompactionConfig`` holds the defaults and per-model overrides (exact ``provider``/``model``
pairs); ``resolve(provider, model)`` gives the policy for one target and ``Policy.scale``
turns its ratios into token budgets for a context window. Unknown keys, out-of-range values
and contradictory retention settings are refused when the config is built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from agentlog.errors import CompactionConfigError, TargetPressureConfigError

__all__ = [
    "CompactionConfig",
    "ModelPolicy",
    "Policy",
    "PressureBudget",
    "PrunerConfig",
    "PRUNE_MARKER",
]

PRUNE_MARKER: Final = "\n\n[... tool result middle pruned ...]\n\n"
"""What replaces the middle of a pruned tool result (39 code points)."""

DEFAULT_RETAIN_RATIO: Final = 0.16


def _is_int(value: object) -> bool:
    return type(value) is int


def _ratio(name: str, value: object) -> None:
    if not isinstance(value, (int, float)) or type(value) is bool or not 0 < value <= 1:
        raise CompactionConfigError(f"{name} must be a number in (0, 1], got {value!r}")


def _count(name: str, value: object, minimum: int) -> None:
    if not _is_int(value) or value < minimum:  # type: ignore[operator]
        raise CompactionConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _pair(provider: object, model: object, what: str) -> None:
    if type(provider) is not str or type(model) is not str:
        raise CompactionConfigError(f"{what} provider and model must be strings")
    if bool(provider) != bool(model):
        raise CompactionConfigError(f"{what} provider and model must be set together "
                                    "(both empty or both non-empty)")


@dataclass(frozen=True, slots=True)
class PressureBudget:
    """A policy scaled to a context window: compact at ``threshold_tokens``, keep ``retain_tokens``."""

    window: int
    threshold_tokens: int
    retain_tokens: int


@dataclass(frozen=True, slots=True)
class Policy:
    """The settings in force for one conversation target (defaults merged with its override)."""

    threshold_ratio: float
    retain_ratio: float | None
    retain_tokens: int | None
    summarization_provider: str
    summarization_model: str
    max_tokens: int
    compaction_retries: int
    max_overflow_retries: int

    def scale(self, window: object, target: str = "") -> PressureBudget:
        """Token budgets for ``window``; TargetPressureConfigError when they cannot work."""
        if not _is_int(window) or window <= 0:  # type: ignore[operator]
            raise TargetPressureConfigError(f"context window of {target or 'the target'} must be a positive "
                                            f"integer, got {window!r}")
        assert isinstance(window, int)
        threshold = math.floor(window * self.threshold_ratio)
        if self.retain_tokens is not None:
            retain = self.retain_tokens
        else:
            retain = math.floor(window * (self.retain_ratio or 0))
        if retain >= threshold:
            raise TargetPressureConfigError(
                f"retention {retain} tokens is not below the threshold {threshold} tokens for "
                f"{target or 'the target'} (window {window})"
            )
        return PressureBudget(window, threshold, retain)


_POLICY_FIELDS: Final = ("threshold_ratio", "retain_ratio", "retain_tokens", "summarization_provider",
                         "summarization_model", "max_tokens", "compaction_retries", "max_overflow_retries")


@dataclass(frozen=True, slots=True)
class ModelPolicy:
    """An exact ``provider``/``model`` override; omitted fields are inherited from the defaults."""

    provider: str
    model: str
    threshold_ratio: float | None = None
    retain_ratio: float | None = None
    retain_tokens: int | None = None
    summarization_provider: str | None = None
    summarization_model: str | None = None
    max_tokens: int | None = None
    compaction_retries: int | None = None
    max_overflow_retries: int | None = None

    def __post_init__(self) -> None:
        for name in ("provider", "model"):
            value = getattr(self, name)
            if type(value) is not str or not value:
                raise CompactionConfigError(f"model policy {name} must be a non-empty string")
        what = f"model policy {self.provider}/{self.model}"
        _check_common(self, what)
        if (self.summarization_provider is None) != (self.summarization_model is None):
            raise CompactionConfigError(f"{what}: summarization provider and model must be given together")


def _check_common(config: CompactionConfig | ModelPolicy, what: str) -> None:
    if config.threshold_ratio is not None:
        _ratio(f"{what}: threshold_ratio", config.threshold_ratio)
    if config.retain_ratio is not None:
        _ratio(f"{what}: retain_ratio", config.retain_ratio)
    if config.retain_tokens is not None:
        _count(f"{what}: retain_tokens", config.retain_tokens, 0)
    if config.retain_ratio is not None and config.retain_tokens is not None:
        raise CompactionConfigError(f"{what}: retain_ratio and retain_tokens are mutually exclusive")
    if config.summarization_provider is not None and config.summarization_model is not None:
        _pair(config.summarization_provider, config.summarization_model, f"{what}: summarization")
    for name, minimum in (("max_tokens", 1), ("compaction_retries", 0), ("max_overflow_retries", 0)):
        value = getattr(config, name)
        if value is not None:
            _count(f"{what}: {name}", value, minimum)


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """Defaults of spec §7. ``retain_ratio`` is 0.16 unless ``retain_tokens`` is given instead."""

    threshold_ratio: float = 0.8
    retain_ratio: float | None = None
    retain_tokens: int | None = None
    summarization_provider: str = ""
    summarization_model: str = ""
    max_tokens: int = 8192
    compaction_retries: int = 1
    max_overflow_retries: int = 1
    model_policies: tuple[ModelPolicy, ...] = field(default=())
    auto: bool = True
    min_new_tokens: int = 0
    """Manual compaction: the least new material (tokens besides a previous checkpoint) worth
    re-summarizing that checkpoint for; below it, or with nothing new, ``compact_now`` declines."""

    def __post_init__(self) -> None:
        if self.retain_ratio is None and self.retain_tokens is None:
            object.__setattr__(self, "retain_ratio", DEFAULT_RETAIN_RATIO)
        _check_common(self, "compaction config")
        _count("compaction config: min_new_tokens", self.min_new_tokens, 0)
        if type(self.auto) is not bool:
            raise CompactionConfigError(f"auto must be a bool, got {self.auto!r}")
        policies = tuple(self.model_policies)
        object.__setattr__(self, "model_policies", policies)
        seen: set[tuple[str, str]] = set()
        for policy in policies:
            if not isinstance(policy, ModelPolicy):
                raise CompactionConfigError(f"model_policies entries must be ModelPolicy, got {policy!r}")
            key = (policy.provider, policy.model)
            if key in seen:
                raise CompactionConfigError(f"duplicate model policy for {policy.provider}/{policy.model}")
            seen.add(key)
        self._check_resolved(None)
        for policy in policies:
            self._check_resolved(policy)

    def _check_resolved(self, policy: ModelPolicy | None) -> None:
        resolved = self._merge(policy)
        if resolved.retain_ratio is not None and resolved.retain_ratio >= resolved.threshold_ratio:
            where = ("compaction config" if policy is None
                     else f"model policy {policy.provider}/{policy.model}")
            raise CompactionConfigError(
                f"{where}: retain_ratio {resolved.retain_ratio} must be below threshold_ratio "
                f"{resolved.threshold_ratio}"
            )

    def _merge(self, policy: ModelPolicy | None) -> Policy:
        values = {name: getattr(self, name) for name in _POLICY_FIELDS}
        if policy is not None:
            for name in _POLICY_FIELDS:
                override = getattr(policy, name)
                if override is not None:
                    values[name] = override
            if policy.retain_tokens is not None:
                values["retain_ratio"] = None
            elif policy.retain_ratio is not None:
                values["retain_tokens"] = None
        return Policy(**values)

    def resolve(self, provider: str | None, model: str | None) -> Policy:
        """The policy for the exact ``provider``/``model`` pair (the defaults when none matches)."""
        for policy in self.model_policies:
            if policy.provider == provider and policy.model == model:
                return self._merge(policy)
        return self._merge(None)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> CompactionConfig:
        """Build from DSH-style camelCase (or snake_case) keys; unknown keys are refused."""
        known = {f.name for f in fields(cls)}
        kwargs = _keys(values, known, "compaction config")
        policies = kwargs.get("model_policies")
        if policies is not None:
            policy_known = {f.name for f in fields(ModelPolicy)}
            kwargs["model_policies"] = tuple(
                ModelPolicy(**_keys(item, policy_known, "model policy")) for item in policies
            )
        return cls(**kwargs)

    def with_retain_tokens(self, tokens: int) -> CompactionConfig:
        """A copy that retains an absolute token count instead of a ratio."""
        return replace(self, retain_ratio=None, retain_tokens=tokens)


def _snake(key: str) -> str:
    return "".join(f"_{char.lower()}" if char.isupper() else char for char in key)


def _keys(values: Any, known: set[str], what: str) -> dict[str, Any]:
    if not isinstance(values, Mapping):
        raise CompactionConfigError(f"{what} must be a mapping, got {type(values).__name__}")
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = _snake(key) if isinstance(key, str) else key
        if name not in known:
            raise CompactionConfigError(f"unknown {what} key {key!r}")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class PrunerConfig:
    """P1: prune results over ``threshold_chars`` code points to head + marker + tail."""

    threshold_chars: int = 8192
    head_chars: int = 4096
    tail_chars: int = 1024

    def __post_init__(self) -> None:
        _count("threshold_chars", self.threshold_chars, 1)
        _count("head_chars", self.head_chars, 0)
        _count("tail_chars", self.tail_chars, 0)
        if self.head_chars + len(PRUNE_MARKER) + self.tail_chars > self.threshold_chars:
            raise CompactionConfigError(
                f"head_chars + {len(PRUNE_MARKER)} (marker) + tail_chars = "
                f"{self.head_chars + len(PRUNE_MARKER) + self.tail_chars} exceeds threshold_chars "
                f"{self.threshold_chars}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> PrunerConfig:
        """Build from camelCase or snake_case keys; unknown (or stale, like ``maxChars``) keys are refused."""
        return cls(**_keys(values, {f.name for f in fields(cls)}, "pruner config"))
